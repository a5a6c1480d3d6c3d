//! MPI_Ibarrier, the persistent barrier, and the queue behind them.
//!
//! Every barrier on a communicator that cannot take the blocking fast path
//! (the first one, which sets the device up; anything issued while
//! non-blocking ones are outstanding) is an operation in the module's
//! queue. The head operation is entered on the device as soon as it is
//! issued — that is the point of the DMA-counter design: once entered, the
//! peers' arrivals complete it, and the entering CPU is free. A rank cannot
//! hold two entries on the device (its wire would toggle back), so the next
//! operation enters when the head is released. Completion is noticed when
//! Open MPI turns progress (MPI_Test, MPI_Wait, any MPI call): a progress
//! callback advances every module with operations in flight. No thread,
//! and nothing runs while the application computes.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, TryLockError};

use crate::bootstrap::Boot;
use crate::p2p::pml::Pml;
use crate::hier::HierOp;
use crate::ffi::{self, Module, ompi_communicator_t as Comm, ompi_info_t as Info, ompi_request_t as Request};
use crate::module::{guard, state, ModuleState, Ticket};

/// One barrier issued on the communicator: its request (null for a
/// blocking MPI_Barrier waiting in `blocking`).
struct Op {
    id: u64,
    req: *mut Request,
    /// MPI_Request_free came while active: free at completion.
    free_when_done: bool,
}

/// How the head operation was entered.
enum Entered {
    Device(Ticket),
    /// The device exchange, itself the first barrier.
    Boot(Box<Boot<Pml>>),
    /// Device unusable: the component below ours serves it.
    Chained(*mut Request),
    /// A communicator spanning nodes.
    Hier(Box<HierOp>),
}

/// A communicator's queue of barriers in flight.
#[derive(Default)]
pub struct Engine {
    queue: VecDeque<Op>,
    head: Option<Entered>,
    next_id: u64,
    /// Operations with id below this are finished (they finish in order).
    finished: u64,
    /// Errors of finished blocking operations, by id (rare).
    errors: Vec<(u64, c_int)>,
    /// Retired MPI_Ibarrier requests kept for reuse (no module reference).
    spare: Vec<*mut Request>,
    /// In the progress callback's list.
    watched: bool,
}

/// Spare requests a module keeps.
const SPARES: usize = 4;

impl Drop for Engine {
    fn drop(&mut self) {
        for mut r in self.spare.drain(..) {
            // SAFETY: a retired request of ours that nobody else knows.
            unsafe { ffi::hwb_request_release(&mut r) };
        }
    }
}

// SAFETY: the raw request pointers are Open MPI objects usable from any
// thread; the engine is only touched under its module's mutex.
unsafe impl Send for Engine {}

impl Engine {
    fn push(&mut self, req: *mut Request) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Op { id, req, free_when_done: false });
        id
    }
}

/// Requests (and the module reference each holds) to release once no lock
/// is held: releasing the last reference destroys the module.
type Releases = Vec<*mut Request>;

/// Enters and completes operations from the head of the queue for as long
/// as they are released.
fn advance(st: &ModuleState, e: &mut Engine, rel: &mut Releases) {
    while let Some(front) = e.queue.front() {
        if e.head.is_none() {
            if let Some(rc) = st.broken() {
                finish(st, e, rc, rel);
                continue;
            }
            if front.req.is_null() && st.unusable() {
                // A blocking MPI_Barrier, and no device: its caller runs
                // a blocking barrier without it (`blocking`), as every
                // peer does for this barrier. The non-blocking one below
                // ours would be another algorithm on other tags, and the
                // peers that called MPI_Barrier with nothing queued would
                // never meet it.
                break;
            }
            e.head = Some(if st.unusable() {
                // No device (or agreed on linear): the component below
                // serves non-blocking barriers.
                let mut r = null_mut();
                match st.fallback_ibarrier(&mut r) {
                    ffi::SUCCESS => Entered::Chained(r),
                    rc => {
                        finish(st, e, rc, rel);
                        continue;
                    }
                }
            } else if st.is_multi_node() {
                match HierOp::start(st) {
                    Ok(h) => Entered::Hier(Box::new(h)),
                    Err(rc) => {
                        st.fail(rc);
                        finish(st, e, rc, rel);
                        continue;
                    }
                }
            } else if let Some(seg) = st.segment() {
                Entered::Device(st.arrive(seg))
            } else {
                let t = st.topo().expect("one-node topology");
                match Boot::start(st.pml(), &t.local, t.me, st.settings()) {
                    Ok(b) => Entered::Boot(Box::new(b)),
                    Err(rc) => {
                        st.fail(rc);
                        finish(st, e, rc, rel);
                        continue;
                    }
                }
            });
        }
        let done = match e.head.as_mut().expect("entered") {
            Entered::Device(t) => Ok(st.released(st.segment().expect("device"), *t)),
            Entered::Boot(b) => match b.poll() {
                Ok(None) => Ok(false),
                Ok(Some(outcome)) => {
                    st.device_ready(outcome);
                    Ok(true)
                }
                Err(rc) => Err(rc),
            },
            Entered::Hier(h) => h.poll(st),
            Entered::Chained(r) => {
                let mut err = ffi::SUCCESS;
                // SAFETY: a live request the component below returned.
                if unsafe { ffi::hwb_request_done(r, &mut err) } != 0 {
                    if err == ffi::SUCCESS { Ok(true) } else { Err(err) }
                } else {
                    Ok(false)
                }
            }
        };
        match done {
            Ok(false) => break,
            Ok(true) => finish(st, e, ffi::SUCCESS, rel),
            Err(rc) => {
                // Our own point-to-point exchanges failed: peers may be out
                // of step with us from here on.
                if matches!(e.head, Some(Entered::Boot(_) | Entered::Hier(_))) {
                    st.fail(rc);
                }
                finish(st, e, rc, rel)
            }
        }
    }
    st.queued.store(!e.queue.is_empty(), Release);
}

/// The head operation is over (with `rc`): complete its request.
fn finish(st: &ModuleState, e: &mut Engine, rc: c_int, rel: &mut Releases) {
    let op = e.queue.pop_front().expect("head");
    e.head = None;
    e.finished = op.id + 1;
    if rc == ffi::SUCCESS {
        st.count_served();
    }
    if op.req.is_null() {
        if rc != ffi::SUCCESS {
            e.errors.push((op.id, rc));
        }
        return;
    }
    // SAFETY: our live request; completing wakes whoever waits on it.
    unsafe { ffi::hwb_request_complete(op.req, rc) };
    if op.free_when_done {
        rel.push(op.req);
    }
}

fn release(reqs: Releases) {
    for mut r in reqs {
        // SAFETY: our request, no longer referenced by any queue; it holds
        // one reference on its module, dropped here after the request.
        unsafe {
            let st = ffi::hwb_request_owner(r).cast::<ModuleState>();
            let module = (*st).module;
            ffi::hwb_request_release(&mut r);
            ffi::hwb_obj_release(module.cast());
        }
    }
}

/// MPI_Barrier behind queued operations, or the first one: queue it and
/// turn progress until it is finished.
pub fn blocking(st: &ModuleState) -> c_int {
    let mut rel = Releases::new();
    let id = {
        let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
        let id = e.push(null_mut());
        advance(st, &mut e, &mut rel);
        id
    };
    loop {
        {
            let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
            advance(st, &mut e, &mut rel);
            if e.finished > id {
                let rc = e.errors.iter().position(|&(i, _)| i == id).map(|k| e.errors.swap_remove(k).1);
                drop(e);
                release(rel);
                return rc.unwrap_or(ffi::SUCCESS);
            }
            if e.head.is_none() && e.queue.front().is_some_and(|op| op.id == id) && st.unusable() {
                // Our turn, and no device (found by a barrier queued before
                // ours): the blocking barrier below ours (or hwbarr's linear
                // one, if agreed on) serves this one, outside our lock, as
                // on every peer.
                e.queue.pop_front();
                e.finished = id + 1;
                st.queued.store(!e.queue.is_empty(), Release);
                drop(e);
                release(rel);
                return st.barrier_without_device();
            }
        }
        ffi::progress();
        std::thread::yield_now();
    }
}

/// Queues `req` (just started), or a new MPI_Ibarrier request if null,
/// enters it if it is at the head, and makes sure progress will look after
/// it. Returns the request (null if none could be made).
fn issue(st: &ModuleState, comm: *mut Comm, req: *mut Request) -> *mut Request {
    let mut rel = Releases::new();
    let (req, watch_it) = {
        let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
        let req = if !req.is_null() {
            req
        } else if let Some(r) = e.spare.pop() {
            // SAFETY: a retired request of ours; it takes a module reference again.
            unsafe {
                ffi::hwb_request_reissue(r);
                ffi::hwb_obj_retain(st.module.cast());
            }
            r
        } else {
            new_request(st, comm, false)
        };
        if req.is_null() {
            return req;
        }
        e.push(req);
        advance(st, &mut e, &mut rel);
        let w = !e.queue.is_empty() && !e.watched;
        if w {
            e.watched = true;
        }
        (req, w)
    };
    release(rel);
    if watch_it {
        watch(st);
    }
    req
}

fn new_request(st: &ModuleState, comm: *mut Comm, persistent: bool) -> *mut Request {
    // SAFETY: creates an Open MPI request owned by the caller; it keeps a
    // reference on our module so that the state outlives it.
    unsafe {
        let r = ffi::hwb_request_new(
            comm,
            persistent as c_int,
            (st as *const ModuleState).cast_mut().cast::<c_void>(),
            Some(start),
            Some(free),
            Some(cancel),
        );
        if !r.is_null() {
            ffi::hwb_obj_retain(st.module.cast());
        }
        r
    }
}

/// MPI_Ibarrier.
pub unsafe extern "C" fn ibarrier(comm: *mut Comm, request: *mut *mut Request, module: *mut Module) -> c_int {
    guard("MPI_Ibarrier", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and a valid out-pointer.
        let st = unsafe { state(module) };
        // SAFETY: as above.
        let out = unsafe { &mut *request };
        if st.unusable() && !st.queued.load(Relaxed) {
            return st.fallback_ibarrier(out);
        }
        let r = issue(st, comm, null_mut());
        if r.is_null() {
            return ffi::ERROR;
        }
        *out = r;
        ffi::SUCCESS
    })
}

/// MPIX_Barrier_init (4.1) / MPI_Barrier_init (5.0): a persistent barrier request, inactive until started.
pub unsafe extern "C" fn barrier_init(
    comm: *mut Comm,
    _info: *mut Info,
    request: *mut *mut Request,
    module: *mut Module,
) -> c_int {
    guard(ffi::abi::BARRIER_INIT_NAME, ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and a valid out-pointer.
        let (st, out) = unsafe { (state(module), &mut *request) };
        let r = new_request(st, comm, true);
        if r.is_null() {
            return ffi::ERROR;
        }
        *out = r;
        ffi::SUCCESS
    })
}

/// MPI_Start / MPI_Startall on our persistent requests.
unsafe extern "C" fn start(count: usize, reqs: *mut *mut Request) -> c_int {
    guard("MPI_Start", ffi::ERROR, || {
        for i in 0..count {
            // SAFETY: Open MPI passes `count` of our persistent requests.
            unsafe {
                let r = *reqs.add(i);
                let st = &*ffi::hwb_request_owner(r).cast::<ModuleState>();
                ffi::hwb_request_activate(r);
                issue(st, st.comm(), r);
            }
        }
        ffi::SUCCESS
    })
}

/// req_free: called by MPI_Wait/Test on a completed request, or by
/// MPI_Request_free.
unsafe extern "C" fn free(request: *mut *mut Request) -> c_int {
    guard("request free", ffi::ERROR, || {
        // SAFETY: Open MPI passes a pointer to one of our requests.
        let r = unsafe { *request };
        // SAFETY: the owner is the module state the request keeps alive.
        let st = unsafe { &*ffi::hwb_request_owner(r).cast::<ModuleState>() };
        enum Fate {
            Later,
            Kept,
            Release,
        }
        let fate = {
            let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(op) = e.queue.iter_mut().find(|op| op.req == r) {
                op.free_when_done = true;
                Fate::Later
            // SAFETY: reads a flag of our live request.
            } else if e.spare.len() < SPARES && unsafe { ffi::hwb_request_is_persistent(r) } == 0 {
                // SAFETY: completed, and MPI forgets it now: ours to keep.
                unsafe { ffi::hwb_request_retire(r) };
                e.spare.push(r);
                Fate::Kept
            } else {
                Fate::Release
            }
        };
        match fate {
            Fate::Later => {}
            // SAFETY: drop the module reference the request held (after
            // unlocking: it may be the last one).
            Fate::Kept => unsafe { ffi::hwb_obj_release(st.module.cast()) },
            Fate::Release => release(vec![r]),
        }
        // SAFETY: the caller's handle (the engine frees an active request
        // when it completes).
        unsafe { ffi::hwb_request_forget(request) };
        ffi::SUCCESS
    })
}

/// Collective operations cannot be cancelled (MPI 4.0, 6.12).
unsafe extern "C" fn cancel(_req: *mut Request, _complete: c_int) -> c_int {
    ffi::ERROR
}

// --- progress: the modules with operations in flight ---

static WATCHED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static WATCHING: AtomicUsize = AtomicUsize::new(0);
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Have progress advance `st` until its queue drains.
fn watch(st: &ModuleState) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    let p = st as *const ModuleState as usize;
    if !w.contains(&p) {
        w.push(p);
    }
    WATCHING.store(w.len(), Release);
    if !REGISTERED.load(Relaxed) && !REGISTERED.swap(true, Relaxed) {
        // SAFETY: registers a plain function that lives as long as the
        // component is loaded; `shutdown` unregisters it at close.
        unsafe { ffi::opal_progress_register(Some(progress)) };
    }
}

/// Called when a module's state is dropped.
pub fn forget(st: &ModuleState) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    let p = st as *const ModuleState as usize;
    w.retain(|&q| q != p);
    WATCHING.store(w.len(), Release);
}

/// Component close: no callback may outlive our code.
pub fn shutdown() {
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
    guard("progress", 0, || {
        let mut rel = Releases::new();
        let mut events = 0;
        {
            // A panic caught while the lock was held poisons it; the list
            // itself is still sound, so keep going with it.
            let mut w = match WATCHED.try_lock() {
                Ok(w) => w,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return 0,
            };
            w.retain(|&p| {
                // SAFETY: watched states are alive: `forget` removes them
                // under this lock before they are dropped.
                let st = unsafe { &*(p as *const ModuleState) };
                let mut e = match st.engine.try_lock() {
                    Ok(e) => e,
                    Err(TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(TryLockError::WouldBlock) => return true,
                };
                let before = e.finished;
                advance(st, &mut e, &mut rel);
                events += (e.finished - before) as c_int;
                e.watched = !e.queue.is_empty();
                e.watched
            });
            WATCHING.store(w.len(), Release);
        }
        release(rel);
        events
    })
}
