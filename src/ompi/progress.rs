//! Open MPI's progress engine drives hwbarr's barriers in flight: a
//! callback, registered when the first module has a barrier in flight,
//! advances the modules in its list — those with barriers in flight, and
//! for a while those that just had some (`ompi::server`) — and costs one
//! atomic load on every progress turn when the list is empty. A pass
//! that leaves a barrier waiting also waits as a blocking barrier would:
//! it yields a core shared by count, by setting or by finding
//! (`contention::Contention::after_pass`).

use std::ffi::c_int;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, TryLockError};

use crate::comm;
use crate::contention::{self, PassStep, Waiting, CONTENTION};
use crate::ompi::ffi;
use crate::ompi::report::guard;
use crate::ompi::probe::{self, Point};

/// What progress advances: a module's state with operations in flight.
pub(crate) trait Watched: Sync {
    /// Advances its operations without blocking (`Advanced`).
    fn advance_watched(&self) -> Advanced;
}

/// What one state's part of a progress pass did.
pub(crate) struct Advanced {
    /// Operations finished.
    pub finished: u64,
    /// Stays watched (false: nothing in flight, and it has cleared its own
    /// mark so that its next issuer calls `watch` again).
    pub stays: bool,
    /// What is still in flight, by its communicator's waiting policy.
    pub waiting: Waiting,
}

/// A watched state, by address.
struct Entry(*const dyn Watched);

// SAFETY: a `Watched` is Sync, and an entry is only dereferenced while it
// is in the list, which `forget` leaves before the state is dropped.
unsafe impl Send for Entry {}

/// The states of the modules progress looks after.
static WATCHED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static WATCHING: AtomicUsize = AtomicUsize::new(0);
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Have progress advance `st` until it drops it (`Watched::advance_watched`).
///
/// # Safety
/// `st` stays alive, and no `&mut` to it is made, until `forget(st)` has
/// returned (`ompi::module` calls it before dropping a module's state).
pub(crate) unsafe fn watch(st: &(dyn Watched + 'static)) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    let p = st as *const dyn Watched;
    if !w.iter().any(|e| std::ptr::addr_eq(e.0, p)) {
        w.push(Entry(p));
    }
    WATCHING.store(w.len(), Release);
    if !REGISTERED.load(Relaxed) && !REGISTERED.swap(true, Relaxed) {
        // SAFETY: registers a plain function that lives as long as the
        // component is loaded; `shutdown` unregisters it at close.
        unsafe { ffi::opal_progress_register(Some(progress)) };
    }
}

/// Takes the state at `st` out of the list, before it is dropped: once
/// this returns, no progress pass uses it (passes hold the list's lock).
/// By address only: nothing is dereferenced.
pub(crate) fn forget<T>(st: *const T) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|e| !std::ptr::addr_eq(e.0, st));
    WATCHING.store(w.len(), Release);
}

/// Component close: no callback may outlive our code. At verbosity 2
/// says how often progress passes gave the core up.
pub fn shutdown() {
    let yields = CONTENTION.pass_yields();
    let moves = CONTENTION.moves();
    if moves > 0 {
        let rank = crate::ompi::report::world_rank_label();
        crate::ompi::report::verbose(2, &format!("world rank {rank}: waits moved this process's threads off a CPU they shared {moves} times"));
    }
    if yields > 0 {
        let rank = crate::ompi::report::world_rank_label();
        crate::ompi::report::verbose(
            2,
            &format!("world rank {rank}: progress passes gave the core up {yields} times while barriers waited"),
        );
    }
    if REGISTERED.swap(false, Relaxed) {
        // SAFETY: unregisters the function registered in `watch`.
        unsafe { ffi::opal_progress_unregister(Some(progress)) };
    }
}

/// Open MPI's progress engine calls this on every turn: advance the
/// watched modules. Cheap when nothing is in flight (one atomic load).
unsafe extern "C" fn progress() -> c_int {
    if WATCHING.load(Relaxed) == 0 {
        return 0;
    }
    probe::stamp(Point::PassIn);
    guard("progress", 0, || {
        let mut events = 0;
        let mut waiting = Waiting::Nothing;
        // A panic caught while the lock was held poisons it; the list
        // itself is still sound, so keep going with it.
        let mut w = match WATCHED.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return 0,
        };
        w.retain(|e| {
            // SAFETY: watched states are alive: `forget` removes them
            // under this lock before they are dropped.
            let st = unsafe { &*e.0 };
            let a = st.advance_watched();
            events += a.finished as c_int;
            waiting = waiting.max(a.waiting);
            a.stays
        });
        WATCHING.store(w.len(), Release);
        drop(w);
        probe::stamp(Point::PassOut);
        match CONTENTION.after_pass(events > 0, waiting) {
            PassStep::Nothing => {}
            // Open MPI yields itself after this pass (`mpi_yield_when_idle`).
            // SAFETY: reads one flag of Open MPI's progress engine.
            _ if unsafe { ffi::hwb_progress_yields() } != 0 => {}
            // hwbarr's own wait turned this pass: it yields by its policy.
            _ if ffi::in_own_turn() => {}
            PassStep::Yield => {
                std::thread::yield_now();
                CONTENTION.pass_yielded();
            }
            PassStep::YieldAndTell => {
                CONTENTION.yielded(contention::yield_and_tell(), contention::step_aside);
                CONTENTION.pass_yielded();
                comm::tell_if_shared();
            }
        }
        events
    })
}
