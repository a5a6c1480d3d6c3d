//! One hwbarr module per communicator: its state, the barrier entry point
//! Open MPI calls, and the fallback it keeps.

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8};
use std::sync::{LazyLock, Mutex, OnceLock};


use crate::agree::Settings;
use crate::bootstrap::{Agreed, Verdict};
use crate::core::{counter, toggle};
use crate::shm::futex::Kernel;
use crate::shm::segment::Segment;
use crate::shm::sleep;
use crate::ffi::{self, Module, ompi_communicator_t as Comm, ompi_request_t as Request};
use crate::engine::{self, Engine};
use crate::inter::{self, InterAlgorithm};
use crate::linear;
use crate::p2p::pml::Pml;
use crate::p2p::Flight;
use crate::topo::Topo;
use crate::params::Params;
use crate::report::{self, Topic};
use crate::settings::Algorithm;
use crate::wait::{self, WaitPolicy};

/// Sleeps on the device's words last at most a slice of the wait.
const FUTEX: Kernel = Kernel { timeout: wait::SLEEP_SLICE };

/// Runs `f`, turning a panic into `fail` plus one line on stderr: no panic
/// may unwind into Open MPI's C frames.
pub fn guard<T>(what: &str, fail: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|e| {
        let msg = e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        report::warn(Topic::InternalError, &format!("internal error in {what}: {msg}"));
        fail
    })
}

/// Facts about this node and job, read once (on the first communicator,
/// after MPI_Init has registered its parameters).
pub struct NodeFacts {
    /// Ranks of this job on this node (Open MPI's launcher tells each rank).
    pub local_ranks: usize,
    pub cores: usize,
    /// The job's `mpi_yield_when_idle`.
    pub yield_when_idle: bool,
}

pub static NODE: LazyLock<NodeFacts> = LazyLock::new(|| NodeFacts {
    local_ranks: std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1),
    cores: wait::cores_online(),
    // SAFETY: reads an MCA variable; no preconditions past MPI_Init's start.
    yield_when_idle: unsafe { ffi::hwb_mpi_yield_when_idle() } != 0,
});

/// Largest communicator `auto` gives the counter barrier: every rank sends
/// n-1 packets (n(n-1) remote atomics, and up to n-1 wake-ups when ranks
/// sleep), against one atomic per rank and one wake-up for toggle. Measured
/// on 2 cores: counter leads at 2 ranks, the two are within noise at 4, and
/// at 8 counter/toggle had per-round medians of 0.97 and 0.84 in two
/// `make bench` runs (README); above 8 the choice follows cost.
pub const AUTO_COUNTER_MAX_RANKS: usize = 8;

/// `auto`: the algorithm for a communicator of `size` ranks on one node.
pub fn choose(requested: Algorithm, size: usize) -> Algorithm {
    match requested {
        Algorithm::Auto if size <= AUTO_COUNTER_MAX_RANKS => Algorithm::Counter,
        Algorithm::Auto => Algorithm::Toggle,
        a => a,
    }
}

fn alg_code(a: Algorithm) -> u8 {
    match a {
        Algorithm::Toggle => 0,
        Algorithm::Counter => 1,
        Algorithm::Linear => 2,
        Algorithm::Auto => 3,
    }
}

fn alg_from(c: u8) -> Algorithm {
    match c {
        0 => Algorithm::Toggle,
        1 => Algorithm::Counter,
        2 => Algorithm::Linear,
        _ => Algorithm::Auto,
    }
}

/// The barrier a lower-priority component had installed, kept (with a
/// reference on its module) for when our device cannot be set up.
struct Fallback<F> {
    call: F,
    module: *mut Module,
}

impl<F> Drop for Fallback<F> {
    fn drop(&mut self) {
        // SAFETY: we retained this module when we saved it.
        unsafe { ffi::hwb_obj_release(self.module.cast()) };
    }
}

type BarrierFn = unsafe extern "C" fn(*mut Comm, *mut Module) -> c_int;
type IbarrierFn = unsafe extern "C" fn(*mut Comm, *mut *mut Request, *mut Module) -> c_int;

/// Where a rank stands in the barrier it entered on the device.
#[derive(Clone, Copy, Debug)]
pub enum Ticket {
    Toggle(toggle::Target),
    Counter,
}

/// Everything a module holds; dropped when Open MPI destroys the module
/// (communicator freed, MPI_Finalize).
pub struct ModuleState {
    pub(crate) module: *mut Module,
    comm: *mut Comm,
    pub(crate) rank: c_int,
    pub(crate) size: c_int,
    cid: u32,
    /// The algorithm (resolved from `auto`): ours until the first exchange,
    /// then rank 0's, which every rank runs (`agree`).
    algorithm: AtomicU8,
    /// The first exchange is over: `algorithm` is the agreed one.
    agreed: AtomicBool,
    /// What the user asked for (`auto` is resolved into `algorithm`).
    requested: Algorithm,
    verbose: c_int,
    policy: WaitPolicy,
    /// Who shares our node; known at creation for one-node communicators,
    /// found on the first barrier for those spanning nodes.
    topo: OnceLock<Topo>,
    /// Members on more than one node: hierarchical barrier.
    multi_node: bool,
    /// The `inter` parameter (None: auto by node count).
    inter_requested: Option<InterAlgorithm>,
    /// The first error a barrier on this communicator returned (0: none).
    /// After one, ranks may be out of step (requests left posted), so every
    /// later barrier fails with it instead of mismatching messages.
    broken: AtomicI32,
    fallback: Option<Fallback<BarrierFn>>,
    ifallback: Option<Fallback<IbarrierFn>>,
    /// The device once set up: never changes afterwards, read without locks.
    seg: OnceLock<Segment>,
    /// Set up failed: the fallbacks serve.
    unusable: AtomicBool,
    /// Barriers issued but not finished (non-blocking ones, or a blocking
    /// one that had to queue behind them): the blocking fast path must not
    /// overtake them.
    pub(crate) engine: Mutex<Engine>,
    pub(crate) queued: AtomicBool,
    served: AtomicU64,
    /// Multi-node: the leaders' algorithm, fixed once the node count is known.
    inter: OnceLock<InterAlgorithm>,
}

impl ModuleState {
    pub fn new(
        comm: *mut Comm,
        rank: c_int,
        size: c_int,
        cid: u32,
        p: &Params,
        requested: Algorithm,
        multi_node: bool,
    ) -> Self {
        let node = &*NODE;
        let policy =
            WaitPolicy::for_node(node.local_ranks, node.cores, node.yield_when_idle, p.spin, p.idle);
        ModuleState {
            module: std::ptr::null_mut(),
            comm,
            rank,
            size,
            cid,
            algorithm: AtomicU8::new(alg_code(choose(requested, size as usize))),
            agreed: AtomicBool::new(false),
            requested,
            verbose: p.verbose,
            policy,
            topo: if multi_node { OnceLock::new() } else { OnceLock::from(Topo::single(rank, size)) },
            multi_node,
            inter_requested: p.inter,
            broken: AtomicI32::new(0),
            fallback: None,
            ifallback: None,
            seg: OnceLock::new(),
            unusable: AtomicBool::new(false),
            engine: Mutex::new(Engine::default()),
            queued: AtomicBool::new(false),
            served: AtomicU64::new(0),
            inter: OnceLock::new(),
        }
    }

    pub(crate) fn comm(&self) -> *mut Comm {
        self.comm
    }

    pub(crate) fn pml(&self) -> Pml {
        Pml::new(self.comm)
    }

    pub(crate) fn algorithm(&self) -> Algorithm {
        alg_from(self.algorithm.load(Relaxed))
    }

    /// What this rank brings to the first exchange.
    pub(crate) fn settings(&self) -> Settings {
        Settings { algorithm: self.algorithm(), inter: self.inter_requested }
    }

    /// Serves MPI_Barrier on the shared-memory device (toggle, counter).
    pub fn on_device(&self) -> bool {
        matches!(self.algorithm(), Algorithm::Toggle | Algorithm::Counter)
    }

    /// Adopts rank 0's algorithm (first exchange). Release: a thread that
    /// sees `agreed` sees the algorithm.
    fn adopt(&self, a: Algorithm) {
        self.algorithm.store(alg_code(a), Relaxed);
        self.agreed.store(true, Release);
    }

    pub(crate) fn is_multi_node(&self) -> bool {
        self.multi_node
    }

    /// The topology, once known.
    pub(crate) fn topo(&self) -> Option<&Topo> {
        self.topo.get()
    }

    /// The error that broke this communicator's barriers, if any.
    pub(crate) fn broken(&self) -> Option<c_int> {
        Some(self.broken.load(Relaxed)).filter(|&rc| rc != 0)
    }

    /// Records the first error of our own point-to-point exchanges.
    pub(crate) fn fail(&self, rc: c_int) {
        let _ = self.broken.compare_exchange(0, if rc == 0 { ffi::ERROR } else { rc }, Relaxed, Relaxed);
    }

    pub(crate) fn unusable(&self) -> bool {
        self.unusable.load(Relaxed)
    }

    fn name(&self) -> String {
        // SAFETY: c_name is a NUL-terminated array inside the live communicator.
        unsafe { CStr::from_ptr(ffi::hwb_comm_name(self.comm)) }.to_string_lossy().into_owned()
    }

    /// One more barrier served. Not a read-modify-write (no locked
    /// instruction on the fast path): barriers on one communicator never
    /// count concurrently (MPI orders collectives per communicator, and the
    /// engine's queue hands over through `queued`'s Release/Acquire).
    pub(crate) fn count_served(&self) {
        self.served.store(self.served.load(Relaxed) + 1, Relaxed);
    }

    /// MPI_Barrier on this communicator.
    fn barrier(&self) -> c_int {
        if !self.on_device() {
            if !self.agreed.load(Acquire) {
                // The first exchange (every rank takes part), then linear.
                return engine::blocking(self);
            }
            return self.linear_barrier();
        }
        if self.unusable() {
            return self.fallback_barrier();
        }
        if self.multi_node {
            if let Some(rc) = self.broken() {
                return rc;
            }
            return match self.topo.get() {
                // Direct path: layout known and nothing queued before us.
                Some(t) if !self.queued.load(Acquire) => match self.hier_barrier(t) {
                    Ok(()) => {
                        self.count_served();
                        ffi::SUCCESS
                    }
                    Err(rc) => {
                        self.fail(rc);
                        rc
                    }
                },
                // First barrier (finds the layout) or behind queued ones.
                _ => engine::blocking(self),
            };
        }
        match self.seg.get() {
            // Fast path: device ready and nothing queued before us.
            Some(seg) if !self.queued.load(Acquire) => {
                let t = self.arrive(seg);
                self.wait(seg, t);
                self.count_served();
                ffi::SUCCESS
            }
            // First barrier (sets the device up) or behind queued ones.
            _ => engine::blocking(self),
        }
    }

    fn linear_barrier(&self) -> c_int {
        match linear::barrier(&self.pml(), self.rank, self.size) {
            Ok(()) => {
                self.count_served();
                ffi::SUCCESS
            }
            Err(rc) => rc,
        }
    }

    /// A blocking barrier once the first exchange decided against the
    /// device: hwbarr's linear barrier if agreed on, else the one below ours.
    pub(crate) fn barrier_without_device(&self) -> c_int {
        if self.algorithm() == Algorithm::Linear {
            self.linear_barrier()
        } else {
            self.fallback_barrier()
        }
    }

    /// Enters a barrier on the device, waking the sleepers our arrival
    /// released (`shm::sleep`: no lost wake-up, and no system call when
    /// nobody sleeps).
    pub(crate) fn arrive(&self, seg: &Segment) -> Ticket {
        let t = self.topo.get().expect("topology known before the device");
        let me = t.me;
        if self.algorithm() == Algorithm::Counter {
            let (cells, asleep) = (seg.counters(), seg.asleep());
            counter::arrive_with(cells, me, |q| sleep::counter_wake(&FUTEX, &cells[q], &asleep[q]));
            Ticket::Counter
        } else {
            let w = seg.wires();
            let (target, fired) = toggle::arrive(&t.shape, &w, me);
            if fired {
                sleep::toggle_wake(&FUTEX, &w, seg.sleepers());
            }
            Ticket::Toggle(target)
        }
    }

    pub(crate) fn released(&self, seg: &Segment, t: Ticket) -> bool {
        match t {
            Ticket::Counter => counter::is_released(seg.counters(), self.topo.get().expect("topology").me),
            Ticket::Toggle(target) => toggle::is_released(&seg.wires(), target),
        }
    }

    /// Waits by the policy until `t` is released.
    fn wait(&self, seg: &Segment, t: Ticket) {
        let progress = ffi::progress;
        let me = self.topo.get().expect("topology").me;
        let sleep = || match t {
            Ticket::Counter => sleep::counter_sleep(&FUTEX, &seg.counters()[me], &seg.asleep()[me]),
            Ticket::Toggle(target) => sleep::toggle_sleep(&FUTEX, &seg.wires(), seg.sleepers(), target),
        };
        wait::wait_until(self.policy, || self.released(seg, t), progress, sleep);
    }

    /// Multi-node, first barrier: the layout is known, and rank 0's
    /// settings (`agreed`: local algorithm and leaders' algorithm, or why
    /// every rank falls back).
    pub(crate) fn layout_known(&self, t: Topo, agreed: crate::topo::Agreed) {
        let _ = self.inter.set(agreed.inter);
        let _ = self.topo.set(t);
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{}' (cid {}): {d}", self.name(), self.cid));
        }
        if let Some(why) = agreed.fallback {
            if self.rank == 0 {
                report::warn(Topic::NoDevice, &format!(
                    "communicator '{}' (cid {}): {why}; MPI_Barrier, MPI_Ibarrier and the persistent barrier \
                     fall back to the next component",
                    self.name(),
                    self.cid
                ));
            }
            self.unusable.store(true, Relaxed);
        } else if agreed.algorithm == Algorithm::Linear {
            // Linear over the whole communicator; the non-blocking barriers
            // go to the component below, as when hwbarr runs linear.
            self.unusable.store(true, Relaxed);
        }
        self.adopt(agreed.algorithm);
    }

    pub(crate) fn inter_algorithm(&self) -> InterAlgorithm {
        *self.inter.get().expect("layout known")
    }

    /// Multi-node, first barrier: our node's device is set up (`Some(Ok)`),
    /// could not be (`Some(Err)`: the local phases run over point-to-point),
    /// or is not needed (`None`: alone on the node).
    pub(crate) fn node_ready(&self, outcome: Option<Result<Segment, String>>) {
        let t = self.topo.get().expect("layout known");
        let local_note = match outcome {
            None => "alone on its node".to_string(),
            Some(Ok(seg)) => {
                let _ = self.seg.set(seg);
                format!("{} on shared memory ({})", self.algorithm(), self.waiting())
            }
            // No segment: the local phases run over point-to-point.
            Some(Err(why)) => {
                format!("linear over point-to-point (no shared memory: {why})")
            }
        };
        if self.verbose >= 1 && (self.rank == 0 || (t.is_leader() && self.verbose >= 2)) {
            report::verbose(1, &format!(
                "communicator '{}' (cid {}, {} ranks on {} nodes): node of rank {}: {} ranks, {local_note}; \
                 between nodes: {} among leaders",
                self.name(),
                self.cid,
                self.size,
                t.leaders.len(),
                self.rank,
                t.local.len(),
                self.inter_algorithm(),
            ));
        }
    }

    /// Node-local barrier (all local ranks arrived), the leaders' inter-node
    /// barrier, then a node-local barrier that releases the node's ranks.
    fn hier_barrier(&self, t: &Topo) -> Result<(), c_int> {
        self.local_phase(t)?;
        if t.is_leader() && t.leaders.len() > 1 {
            let mut f = Flight::new(self.pml());
            inter::barrier(&mut f, &t.leaders, t.node, *self.inter.get().expect("inter algorithm"))?;
        }
        self.local_phase(t)
    }

    fn local_phase(&self, t: &Topo) -> Result<(), c_int> {
        if t.local.len() < 2 {
            return Ok(());
        }
        match self.seg.get() {
            Some(seg) => {
                let ticket = self.arrive(seg);
                self.wait(seg, ticket);
                Ok(())
            }
            None => linear::barrier_among(&self.pml(), &t.local, t.me),
        }
    }

    /// The waiting policy, as verbose output states it.
    fn waiting(&self) -> String {
        format!("waiting by {:?}, {} polls per progress turn", self.policy.idle, self.policy.spins)
    }

    /// The device exchange finished (one node): adopt rank 0's algorithm,
    /// keep the segment, or give up on it.
    pub(crate) fn device_ready(&self, agreed: Agreed) {
        let name = self.name();
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{name}' (cid {}): {d}", self.cid));
        }
        let alg = agreed.algorithm;
        match agreed.verdict {
            Verdict::Device(seg) => {
                if self.rank == 0 && self.verbose >= 1 {
                    let alg = match self.requested {
                        Algorithm::Auto if alg == choose(Algorithm::Auto, self.size as usize) => {
                            format!("{alg} (auto: {} ranks, {})", self.size, self.waiting())
                        }
                        _ => format!("{alg} ({})", self.waiting()),
                    };
                    report::verbose(1, &format!(
                        "communicator '{name}' (cid {}, {} ranks, one node): MPI_Barrier served by {alg} \
                         on shared memory ({} bytes)",
                        self.cid,
                        self.size,
                        seg.layout().len
                    ));
                }
                let _ = self.seg.set(seg);
            }
            Verdict::Linear => {
                // Every rank runs linear; the non-blocking barriers go to the
                // component below, as when hwbarr runs linear.
                self.unusable.store(true, Relaxed);
            }
            Verdict::NoDevice(why) => {
                if self.rank == 0 {
                    report::warn(Topic::NoDevice, &format!(
                        "communicator '{name}' (cid {}): no shared-memory device ({why}); \
                         MPI_Barrier, MPI_Ibarrier and the persistent barrier fall back to the next component",
                        self.cid
                    ));
                }
                self.unusable.store(true, Relaxed);
            }
        }
        self.adopt(alg);
    }

    pub(crate) fn segment(&self) -> Option<&Segment> {
        self.seg.get()
    }

    pub(crate) fn fallback_barrier(&self) -> c_int {
        match &self.fallback {
            // SAFETY: a barrier function and module Open MPI installed on
            // this communicator; we hold a reference on the module.
            Some(f) => unsafe { (f.call)(self.comm, f.module) },
            None => match linear::barrier(&self.pml(), self.rank, self.size) {
                Ok(()) => ffi::SUCCESS,
                Err(rc) => rc,
            },
        }
    }

    /// Starts the barrier below ours non-blockingly (device unusable).
    pub(crate) fn fallback_ibarrier(&self, req: &mut *mut Request) -> c_int {
        match &self.ifallback {
            // SAFETY: as in `fallback_barrier`, for the ibarrier entry.
            Some(f) => unsafe { (f.call)(self.comm, req, f.module) },
            None => ffi::ERROR,
        }
    }
}

impl Drop for ModuleState {
    fn drop(&mut self) {
        engine::forget(self);
        let served = self.served.load(Relaxed);
        if self.verbose >= 2 && served > 0 {
            report::verbose(2, &format!(
                "rank {} of communicator cid {}: served {} barriers with {}",
                self.rank, self.cid, served, self.algorithm()
            ));
        }
    }
}

/// # Safety
/// `module` must be an hwbarr module made by `new_module`.
pub(crate) unsafe fn state<'a>(module: *mut Module) -> &'a ModuleState {
    // SAFETY: set by `new_module` to a leaked Box, freed only by the
    // module's destructor, which runs after the last call into it. Shared
    // parts are atomics or behind locks.
    unsafe { &*ffi::hwb_module_state(module).cast::<ModuleState>() }
}

/// # Safety
/// As `state`, and no other reference to the state may be alive: only
/// while Open MPI sets the module up.
unsafe fn state_mut<'a>(module: *mut Module) -> &'a mut ModuleState {
    // SAFETY: see above; enable/disable run before and after any barrier.
    unsafe { &mut *ffi::hwb_module_state(module).cast::<ModuleState>() }
}

/// Builds an Open MPI module object around `st`.
pub fn new_module(mut st: ModuleState) -> *mut Module {
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
        // Every algorithm: the first barrier of any kind is the first
        // exchange, in which the ranks agree on one algorithm.
        (*m).coll_ibarrier = Some(engine::ibarrier);
        (*m).coll_barrier_init = Some(engine::barrier_init);
        st.module = m;
        ffi::hwb_module_set_state(m, Box::into_raw(Box::new(st)).cast());
        m
    }
}

unsafe extern "C" fn enable(module: *mut Module, comm: *mut Comm) -> c_int {
    guard("module enable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and its live communicator,
        // before any collective runs on it.
        let st = unsafe { state_mut(module) };
        st.comm = comm;
        let (mut f, mut m) = (None, std::ptr::null_mut());
        // SAFETY: reads the barrier installed so far on this communicator.
        unsafe { ffi::hwb_comm_current_barrier(comm, &mut f, &mut m) };
        if let (Some(call), false) = (f, m.is_null()) {
            // SAFETY: keep the module alive while we may call it.
            unsafe { ffi::hwb_obj_retain(m.cast()) };
            st.fallback = Some(Fallback { call, module: m });
        }
        let (mut f, mut m) = (None, std::ptr::null_mut());
        // SAFETY: as above, for the non-blocking barrier.
        unsafe { ffi::hwb_comm_current_ibarrier(comm, &mut f, &mut m) };
        if let (Some(call), false) = (f, m.is_null()) {
            // SAFETY: keep the module alive while we may call it.
            unsafe { ffi::hwb_obj_retain(m.cast()) };
            st.ifallback = Some(Fallback { call, module: m });
        }
        ffi::SUCCESS
    })
}

unsafe extern "C" fn disable(module: *mut Module, _comm: *mut Comm) -> c_int {
    guard("module disable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module, after its last collective.
        let st = unsafe { state_mut(module) };
        // Drop our references: no cycles between modules.
        st.fallback = None;
        st.ifallback = None;
        ffi::SUCCESS
    })
}

unsafe extern "C" fn barrier(_comm: *mut Comm, module: *mut Module) -> c_int {
    guard("MPI_Barrier", ffi::ERROR, || {
        // SAFETY: Open MPI calls this with the module it selected: ours.
        unsafe { state(module) }.barrier()
    })
}

/// The barriers hwbarr served on `comm` (0 when another component serves
/// its barrier), for the MPI_T performance variable.
///
/// # Safety
/// `comm` must be a live communicator.
pub(crate) unsafe fn served_on(comm: *mut Comm) -> u64 {
    let (mut f, mut m) = (None, std::ptr::null_mut());
    // SAFETY: reads the barrier entry of a live communicator.
    unsafe { ffi::hwb_comm_current_barrier(comm, &mut f, &mut m) };
    match f {
        Some(f) if std::ptr::fn_addr_eq(f, barrier as BarrierFn) && !m.is_null() => {
            // SAFETY: the communicator's barrier is ours, so its module is
            // an hwbarr module made by `new_module`.
            unsafe { state(m) }.served.load(Relaxed)
        }
        _ => 0,
    }
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
