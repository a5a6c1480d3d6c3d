//! One hwbarr module per communicator: its state, the barrier entry point
//! Open MPI calls, and the fallback it keeps.

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use once_cell::sync::Lazy;

use std::sync::atomic::fence;
use std::sync::atomic::Ordering::SeqCst;

use crate::bootstrap;
use crate::core::{counter, toggle};
use crate::device::Segment;
use crate::ffi::{self, mca_coll_base_module_2_3_0_t as Module, ompi_communicator_t as Comm};
use crate::futex;
use crate::linear::{self, Pml};
use crate::params::{Algorithm, Params};
use crate::wait::{self, WaitPolicy};

/// Runs `f`, turning a panic into `fail` plus one line on stderr: no panic
/// may unwind into Open MPI's C frames.
pub fn guard<T>(what: &str, fail: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|e| {
        let msg = e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        say(&format!("internal error in {what}: {msg}"));
        fail
    })
}

/// Writes one line to stderr in a single write, so that lines of ranks
/// sharing a terminal do not interleave.
pub fn say(msg: &str) {
    use std::io::Write;
    let line = format!("coll:hwbarr: {msg}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Facts about this node, read once.
pub struct NodeFacts {
    /// Ranks of this job on this node (Open MPI's launcher tells each rank).
    pub local_ranks: usize,
    pub cores: usize,
}

pub static NODE: Lazy<NodeFacts> = Lazy::new(|| NodeFacts {
    local_ranks: std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1),
    cores: wait::cores_online(),
});

/// Largest communicator `auto` gives the counter barrier: every rank sends
/// n-1 packets (n(n-1) remote atomics, and up to n-1 wake-ups when ranks
/// sleep), against one atomic per rank and one wake-up for toggle; measured
/// on 2 cores, counter leads at 2 ranks and the two are within noise at 4
/// and 8 (README, `make bench`).
pub const AUTO_COUNTER_MAX_RANKS: usize = 4;

/// `auto`: the algorithm for a communicator of `size` ranks on one node.
pub fn choose(requested: Algorithm, size: usize) -> Algorithm {
    match requested {
        Algorithm::Auto if size <= AUTO_COUNTER_MAX_RANKS => Algorithm::Counter,
        Algorithm::Auto => Algorithm::Toggle,
        a => a,
    }
}

/// The barrier a lower-priority component had installed, kept (with a
/// reference on its module) for when our device cannot be set up.
struct Fallback {
    barrier: unsafe extern "C" fn(*mut Comm, *mut Module) -> c_int,
    module: *mut Module,
}

impl Drop for Fallback {
    fn drop(&mut self) {
        // SAFETY: we retained this module when we saved it.
        unsafe { ffi::hwb_obj_release(self.module.cast()) };
    }
}

enum Device {
    /// Not set up yet: happens on the first barrier.
    Unset,
    Ready(Segment),
    /// Could not be set up: the fallback serves.
    Unusable,
}

/// Everything a module holds; dropped when Open MPI destroys the module
/// (communicator freed, MPI_Finalize).
pub struct ModuleState {
    comm: *mut Comm,
    rank: c_int,
    size: c_int,
    cid: u32,
    algorithm: Algorithm,
    /// What the user asked for (`auto` is resolved into `algorithm`).
    requested: Algorithm,
    verbose: c_int,
    policy: WaitPolicy,
    shape: toggle::Shape,
    fallback: Option<Fallback>,
    device: Device,
    served: u64,
}

impl ModuleState {
    pub fn new(
        comm: *mut Comm,
        rank: c_int,
        size: c_int,
        cid: u32,
        p: &Params,
        requested: Algorithm,
    ) -> Self {
        let node = &*NODE;
        // SAFETY: opal_progress_yield_when_idle is a plain bool Open MPI sets at init.
        let yield_idle = unsafe { ffi::opal_progress_yield_when_idle };
        ModuleState {
            comm,
            rank,
            size,
            cid,
            algorithm: choose(requested, size as usize),
            requested,
            verbose: p.verbose,
            policy: WaitPolicy::for_node(
                node.local_ranks,
                node.cores,
                yield_idle,
                p.spin,
                p.idle.clone().unwrap_or(None),
            ),
            shape: toggle::Shape::new(size as usize),
            fallback: None,
            device: Device::Unset,
            served: 0,
        }
    }

    fn pml(&self) -> Pml {
        Pml { comm: self.comm }
    }

    fn name(&self) -> String {
        // SAFETY: c_name is a NUL-terminated array inside the live communicator.
        unsafe { CStr::from_ptr(ffi::hwb_comm_name(self.comm)) }
            .to_string_lossy()
            .into_owned()
    }

    fn say(&self, level: c_int, msg: &str) {
        if self.verbose >= level {
            say(msg);
        }
    }

    /// MPI_Barrier on this communicator.
    fn barrier(&mut self) -> c_int {
        let res = match (self.algorithm, &self.device) {
            (Algorithm::Linear, _) => linear::barrier(self.pml(), self.rank, self.size),
            (_, Device::Ready(seg)) => {
                self.shm_barrier(seg);
                Ok(())
            }
            (_, Device::Unset) => self.first_barrier(),
            (_, Device::Unusable) => return self.fallback_barrier(),
        };
        match res {
            Ok(()) => {
                self.served += 1;
                ffi::SUCCESS
            }
            Err(rc) => rc,
        }
    }

    /// One barrier on the shared-memory device. Sleepers announce
    /// themselves before sleeping and the releasing rank looks after
    /// releasing (SeqCst fences on both sides), so either the sleeper sees
    /// the release or the releaser sees the sleeper: no lost wake-up, and no
    /// system call when nobody sleeps.
    fn shm_barrier(&self, seg: &Segment) {
        let progress = || {
            // SAFETY: opal_progress may be called from any MPI call.
            unsafe { ffi::opal_progress() }
        };
        let me = self.rank as usize;
        if self.algorithm == Algorithm::Counter {
            let (cells, asleep) = (seg.counters(), seg.asleep());
            counter::arrive_with(cells, me, |q| {
                fence(SeqCst);
                if asleep[q].load(SeqCst) != 0 {
                    futex::wake_all(&*cells[q]);
                }
            });
            let sleep = || {
                asleep[me].store(1, SeqCst);
                fence(SeqCst);
                let v = cells[me].load(SeqCst);
                if v > 0 {
                    futex::wait(&*cells[me], v as u32, wait::SLEEP_SLICE);
                }
                asleep[me].store(0, SeqCst);
            };
            wait::wait_until(
                self.policy,
                || counter::is_released(cells, me),
                progress,
                sleep,
            );
        } else {
            let (w, sleepers) = (seg.wires(), seg.sleepers());
            let (target, fired) = toggle::arrive(&self.shape, &w, me);
            if fired {
                fence(SeqCst);
                if sleepers.load(SeqCst) != 0 {
                    futex::wake_all(w.input);
                }
                return;
            }
            let sleep = || {
                sleepers.fetch_add(1, SeqCst);
                fence(SeqCst);
                if !toggle::is_released(&w, target) {
                    futex::wait(w.input, target.0 ^ 1, wait::SLEEP_SLICE);
                }
                sleepers.fetch_sub(1, SeqCst);
            };
            wait::wait_until(
                self.policy,
                || toggle::is_released(&w, target),
                progress,
                sleep,
            );
        }
    }

    /// Sets the device up; the exchange is itself the first barrier.
    fn first_barrier(&mut self) -> Result<(), c_int> {
        let name = self.name();
        let alg = match self.requested {
            Algorithm::Auto => format!(
                "{} (auto: {} ranks, waiting by {:?})",
                self.algorithm, self.size, self.policy.idle
            ),
            a => format!("{a} (waiting by {:?})", self.policy.idle),
        };
        match bootstrap::run(self.pml(), self.rank, self.size)? {
            Ok(seg) => {
                if self.rank == 0 {
                    self.say(
                        1,
                        &format!(
                            "communicator '{name}' (cid {}, {} ranks, one node): MPI_Barrier served by {alg} \
                             on shared memory ({} bytes)",
                            self.cid,
                            self.size,
                            seg.layout().len
                        ),
                    );
                }
                self.device = Device::Ready(seg);
            }
            Err(why) => {
                if self.rank == 0 {
                    say(&format!(
                        "communicator '{name}' (cid {}): no shared-memory device ({why}); \
                         MPI_Barrier falls back to the next component",
                        self.cid
                    ));
                }
                self.device = Device::Unusable;
            }
        }
        Ok(())
    }

    fn fallback_barrier(&mut self) -> c_int {
        match &self.fallback {
            // SAFETY: a barrier function and module Open MPI installed on
            // this communicator; we hold a reference on the module.
            Some(f) => unsafe { (f.barrier)(self.comm, f.module) },
            None => match linear::barrier(self.pml(), self.rank, self.size) {
                Ok(()) => ffi::SUCCESS,
                Err(rc) => rc,
            },
        }
    }
}

impl Drop for ModuleState {
    fn drop(&mut self) {
        if self.verbose >= 2 && self.served > 0 {
            say(&format!(
                "rank {} of communicator cid {}: served {} barriers with {}",
                self.rank, self.cid, self.served, self.algorithm
            ));
        }
    }
}

/// # Safety
/// `module` must be an hwbarr module made by `new_module`.
unsafe fn state<'a>(module: *mut Module) -> &'a mut ModuleState {
    // SAFETY: set by `new_module` to a leaked Box, freed only by the
    // module's destructor; MPI forbids concurrent collectives on one
    // communicator, so no two calls hold it at once.
    unsafe { &mut *ffi::hwb_module_state(module).cast::<ModuleState>() }
}

/// Builds an Open MPI module object around `st`.
pub fn new_module(st: ModuleState) -> *mut Module {
    // SAFETY: hwb_module_new returns a fresh module object or NULL; we fill
    // in our entry points and hand it our state, which its destructor drops.
    unsafe {
        let m = ffi::hwb_module_new();
        if m.is_null() {
            return m;
        }
        (*m).coll_module_enable = Some(enable);
        (*m).coll_module_disable = Some(disable);
        (*m).coll_barrier = Some(barrier);
        ffi::hwb_module_set_state(m, Box::into_raw(Box::new(st)).cast());
        m
    }
}

unsafe extern "C" fn enable(module: *mut Module, comm: *mut Comm) -> c_int {
    guard("module enable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and its live communicator.
        let st = unsafe { state(module) };
        st.comm = comm;
        let (mut f, mut m) = (None, std::ptr::null_mut());
        // SAFETY: reads the barrier installed so far on this communicator.
        unsafe { ffi::hwb_comm_current_barrier(comm, &mut f, &mut m) };
        if let (Some(barrier), false) = (f, m.is_null()) {
            // SAFETY: keep the module alive while we may call it.
            unsafe { ffi::hwb_obj_retain(m.cast()) };
            st.fallback = Some(Fallback { barrier, module: m });
        }
        ffi::SUCCESS
    })
}

unsafe extern "C" fn disable(module: *mut Module, _comm: *mut Comm) -> c_int {
    guard("module disable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module.
        let st = unsafe { state(module) };
        st.fallback = None; // drop our reference: no cycles between modules
        ffi::SUCCESS
    })
}

unsafe extern "C" fn barrier(_comm: *mut Comm, module: *mut Module) -> c_int {
    // SAFETY: Open MPI calls this with the module it selected: ours.
    guard("MPI_Barrier", ffi::ERROR, || {
        unsafe { state(module) }.barrier()
    })
}

/// Called by the module's C destructor: frees the Rust state.
#[no_mangle]
pub extern "C" fn hwbarr_module_state_drop(state: *mut c_void) {
    guard("module release", (), || {
        if !state.is_null() {
            // SAFETY: the pointer came from Box::into_raw in `new_module`
            // and the destructor hands it over exactly once.
            drop(unsafe { Box::from_raw(state.cast::<ModuleState>()) });
        }
    })
}
