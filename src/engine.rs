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
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, TryLockError};

use crate::bootstrap::Boot;
use crate::comm::{Comm, Ticket};
use crate::hier::HierOp;
use crate::linear::LinearOp;
use crate::lookout::Lookout;
use crate::ompi::ffi::{self, ompi_communicator_t as OmpiComm, ompi_request_t as Request, Module};
use crate::ompi::report::guard;
use crate::p2p::pml::Pml;
use crate::p2p::P2p;
use crate::wait::{self, WaitPolicy};

pub type BarrierFn = unsafe extern "C" fn(*mut OmpiComm, *mut Module) -> c_int;

/// Serves the barriers of one communicator: the blocking fast path and
/// the queue of barriers in flight. The Rust
/// state of an hwbarr module object (`ompi::module`), dropped when Open
/// MPI destroys the module (communicator freed, MPI_Finalize).
pub struct Server {
    pub(crate) module: *mut Module,
    ompi_comm: *mut OmpiComm,
    pub comm: Comm<Pml>,
    /// Barriers issued but not finished (non-blocking ones, or a blocking
    /// one that had to queue behind them): the blocking fast path must not
    /// overtake them.
    engine: Mutex<Engine>,
    queued: AtomicBool,
}

impl Server {
    /// The state of the module serving `ompi_comm`.
    ///
    /// # Safety
    /// `ompi_comm` is the live communicator `comm`'s transport talks on;
    /// `module` must be set to the module object that owns this state
    /// before any request is made (`ompi::module::new_module` does).
    pub unsafe fn new(ompi_comm: *mut OmpiComm, comm: Comm<Pml>) -> Server {
        Server {
            module: null_mut(),
            ompi_comm,
            comm,
            engine: Mutex::new(Engine::default()),
            queued: AtomicBool::new(false),
        }
    }

    /// At module enable: the communicator Open MPI hands us.
    ///
    /// # Safety
    /// `c` is the live communicator this module is enabled on.
    pub unsafe fn set_comm(&mut self, c: *mut OmpiComm) {
        self.ompi_comm = c;
        // SAFETY: `c` is live, and the module (which lives as long as its
        // communicator or a request of it) keeps it alive (see above).
        self.comm.set_p2p(unsafe { Pml::new(c) });
    }

    /// MPI_Barrier on this communicator.
    pub fn barrier(&self) -> c_int {
        let c = &self.comm;
        if let Some(rc) = c.broken() {
            // hwbarr's exchanges failed here: every later barrier fails.
            return rc;
        }
        if !c.on_device() || c.unusable() {
            // hwbarr's linear barrier, agreed on or for want of a device,
            // serves every kind of barrier here, so that a failure notice
            // always meets a receive of hwbarr's. Its messages share one
            // tag: a blocking barrier must not overtake the non-blocking
            // ones queued before it, or it would match their messages.
            if !c.agreed() || self.queued.load(Acquire) {
                // The first exchange (every rank takes part), or our turn
                // behind queued ones; then linear.
                return blocking(self);
            }
            return code(c.linear_barrier());
        }
        if c.is_multi_node() {
            return match c.topo() {
                // Direct path: layout known and nothing queued before us.
                Some(t) if !self.queued.load(Acquire) => match c.hier_barrier(t) {
                    Ok(()) => {
                        c.count_served();
                        ffi::SUCCESS
                    }
                    Err(rc) => rc,
                },
                // First barrier (finds the layout) or behind queued ones.
                _ => blocking(self),
            };
        }
        match c.segment() {
            // Fast path: device ready and nothing queued before us.
            Some(seg) if !self.queued.load(Acquire) => code(c.device_barrier(seg)),
            // First barrier (sets the device up) or behind queued ones.
            _ => blocking(self),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        forget(self);
        self.comm.report_served();
    }
}

fn code(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(ffi::SUCCESS)
}

/// One barrier issued on the communicator: its request (null for a
/// blocking MPI_Barrier waiting in `blocking`).
struct Op {
    id: u64,
    req: *mut Request,
    /// The non-blocking collective tag this barrier took (`nbc_tag`), for
    /// the lookout of a first exchange; None for a blocking MPI_Barrier.
    nbc_tag: Option<c_int>,
}

/// How the head operation was entered.
enum Entered {
    Device(Ticket),
    /// The device exchange, itself the first barrier.
    Boot(Box<Boot<Pml>>),
    /// No device (or linear agreed on): hwbarr's linear barrier over
    /// point-to-point. Not the component below: libnbc takes its tag when
    /// its MPI_Ibarrier is called, and one queued here would call it out
    /// of order with the other non-blocking collectives issued meanwhile;
    /// and hwbarr's failure notices would not reach its receives.
    Linear(LinearOp<Pml>),
    /// A communicator spanning nodes.
    Hier(Box<HierOp<Pml>>),
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
    /// Each live persistent barrier request's tag, taken at its init.
    persistent_tags: Vec<(*mut Request, c_int)>,
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
    fn push(&mut self, req: *mut Request, nbc_tag: Option<c_int>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Op { id, req, nbc_tag });
        id
    }
}

/// Enters and completes operations from the head of the queue for as long
/// as they are released.
fn advance(st: &Server, e: &mut Engine) {
    let c = &st.comm;
    while let Some(front) = e.queue.front() {
        let tag = front.nbc_tag;
        if e.head.is_none() {
            if let Some(rc) = c.broken() {
                finish(st, e, rc);
                continue;
            }
            if front.req.is_null() && c.unusable() {
                // A blocking MPI_Barrier, and no device: its caller runs
                // hwbarr's blocking linear barrier (`blocking`), as every
                // peer that called MPI_Barrier with nothing queued does.
                break;
            }
            e.head = Some(if c.unusable() {
                let all: Vec<c_int> = (0..c.size()).collect();
                match LinearOp::start(*c.p2p(), &all, c.rank() as usize) {
                    Ok(op) => Entered::Linear(op),
                    Err(rc) => {
                        c.fail(rc);
                        finish(st, e, rc);
                        continue;
                    }
                }
            } else if c.is_multi_node() {
                let lookout = (!c.agreed()).then(|| Lookout::new(tag));
                match HierOp::start(c, lookout) {
                    Ok(h) => Entered::Hier(Box::new(h)),
                    Err(rc) => {
                        c.fail(rc);
                        finish(st, e, rc);
                        continue;
                    }
                }
            } else if let Some(seg) = c.segment() {
                Entered::Device(c.arrive(seg))
            } else {
                let t = c.topo().expect("one-node topology");
                match Boot::start(*c.p2p(), &t.local, t.me, c.settings(), Some(Lookout::new(tag))) {
                    Ok(b) => Entered::Boot(Box::new(b)),
                    Err(rc) => {
                        c.fail(rc);
                        finish(st, e, rc);
                        continue;
                    }
                }
            });
        }
        let done = match e.head.as_mut().expect("entered") {
            Entered::Device(t) => c.released(c.segment().expect("device"), *t),
            Entered::Boot(b) => match b.poll() {
                Ok(None) => Ok(false),
                Ok(Some(outcome)) => {
                    c.device_ready(outcome);
                    Ok(true)
                }
                Err(rc) => Err(rc),
            },
            Entered::Hier(h) => h.poll(c),
            Entered::Linear(op) => op.poll(),
        };
        match done {
            Ok(false) => break,
            Ok(true) => finish(st, e, ffi::SUCCESS),
            Err(rc) => {
                // Our own exchanges failed (or a peer's did, and told us):
                // peers may be out of step with us from here on.
                c.fail(rc);
                finish(st, e, rc)
            }
        }
    }
    st.queued.store(!e.queue.is_empty(), Release);
}

/// The head operation is over (with `rc`): complete its request.
fn finish(st: &Server, e: &mut Engine, rc: c_int) {
    let op = e.queue.pop_front().expect("head");
    e.head = None;
    e.finished = op.id + 1;
    if rc == ffi::SUCCESS {
        st.comm.count_served();
    }
    if op.req.is_null() {
        if rc != ffi::SUCCESS {
            e.errors.push((op.id, rc));
        }
        return;
    }
    // SAFETY: our live request; completing wakes whoever waits on it.
    unsafe { ffi::hwb_request_complete(op.req, rc) };
}

/// The module state an hwbarr request belongs to.
///
/// # Safety
/// `r` is a request made by `new_request` and not released: its hold
/// keeps the state alive for as long as the reference is used.
unsafe fn owner<'a>(r: *mut Request) -> &'a Server {
    // SAFETY: see above; `new_request` stored the state as the owner.
    unsafe { &*ffi::hwb_request_owner(r).cast::<Server>() }
}

/// Releases a request nobody references any more, with no lock of ours
/// held: dropping its hold may destroy the module and its state.
///
/// # Safety
/// `r` is a request of ours that no queue and no MPI handle refers to.
unsafe fn release(mut r: *mut Request) {
    // SAFETY: see above; the request holds one reference on its module
    // and one on its communicator, dropped here after the request (the
    // state may be gone after either, so its fields are read first).
    unsafe {
        let (module, comm) = {
            let st = owner(r);
            (st.module, st.ompi_comm)
        };
        ffi::hwb_request_release(&mut r);
        unhold(module, comm);
    }
}

/// A request's hold on what it uses: the module (whose state it points
/// to) and the communicator. MPI_Comm_free only marks a communicator for
/// deallocation; Open MPI destroys it, and with it the module, when its
/// last reference goes. Holding one per request keeps both alive until the
/// request is freed, whatever the order of MPI_Comm_free, MPI_Wait and
/// MPI_Request_free (MPI 4.1, 7.4.3: pending operations complete normally).
///
/// # Safety
/// `st` is a module state whose `module` and `ompi_comm` are live.
unsafe fn hold(st: &Server) {
    // SAFETY: both are live Open MPI objects (see above).
    unsafe {
        ffi::hwb_obj_retain(st.module.cast());
        ffi::hwb_obj_retain(st.ompi_comm.cast());
    }
}

/// Drops a hold taken by `hold`, with no lock of ours held: the last
/// reference on the communicator destroys it, its module and the state.
///
/// # Safety
/// A hold on `module` and `comm` is owned by the caller and not used again.
unsafe fn unhold(module: *mut Module, comm: *mut OmpiComm) {
    // SAFETY: see above; the module goes first, the communicator holds
    // the module's last reference until it is destroyed itself.
    unsafe {
        ffi::hwb_obj_release(module.cast());
        ffi::hwb_obj_release(comm.cast());
    }
}

/// MPI_Barrier behind queued operations, or the first one: queue it and
/// turn progress until it is finished.
fn blocking(st: &Server) -> c_int {
    let id = {
        let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
        let id = e.push(null_mut(), None);
        advance(st, &mut e);
        id
    };
    // Our barrier finished (with its code), or it is our turn and there is
    // no device (found by a barrier queued before ours): then hwbarr's
    // blocking linear barrier serves this one, outside our lock, as on
    // every peer.
    enum End {
        Finished(c_int),
        WithoutDevice,
    }
    let mut end = None;
    wait::wait_until(
        WaitPolicy::TURN_PROGRESS_AND_YIELD,
        || {
            let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
            advance(st, &mut e);
            if e.finished > id {
                let rc = e.errors.iter().position(|&(i, _)| i == id).map(|k| e.errors.swap_remove(k).1);
                end = Some(End::Finished(rc.unwrap_or(ffi::SUCCESS)));
            } else if e.head.is_none() && e.queue.front().is_some_and(|op| op.id == id) && st.comm.unusable() {
                e.queue.pop_front();
                e.finished = id + 1;
                st.queued.store(!e.queue.is_empty(), Release);
                end = Some(End::WithoutDevice);
            }
            end.is_some()
        },
        ffi::progress,
        || {},
    );
    match end.expect("finished") {
        End::Finished(rc) => rc,
        End::WithoutDevice => code(st.comm.linear_barrier()),
    }
}

/// Queues `req` (just started), or a new MPI_Ibarrier request if null,
/// enters it if it is at the head, and makes sure progress will look after
/// it. Returns the request (null if none could be made). `tag`: the
/// non-blocking collective tag the call took (`nbc_tag`), for an
/// MPI_Ibarrier; a started persistent barrier has the one of its init.
///
/// # Safety
/// `comm` is `st`'s live communicator; a non-null `req` is one of `st`'s
/// persistent requests, just activated.
pub unsafe fn issue(st: &Server, comm: *mut OmpiComm, req: *mut Request, tag: Option<c_int>) -> *mut Request {
    let persistent = !req.is_null();
    let (req, watch_it) = {
        let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
        let req = if persistent {
            req
        } else if let Some(r) = e.spare.pop() {
            // SAFETY: a retired request of ours; it takes its hold again.
            unsafe {
                ffi::hwb_request_reissue(r);
                hold(st);
            }
            r
        } else {
            // SAFETY: `comm` is `st`'s live communicator (see above).
            unsafe { new_request(st, comm, false) }
        };
        if req.is_null() {
            return req;
        }
        let tag = if persistent { e.persistent_tags.iter().find(|(r, _)| *r == req).map(|&(_, t)| t) } else { tag };
        e.push(req, tag);
        advance(st, &mut e);
        let w = !e.queue.is_empty() && !e.watched;
        if w {
            e.watched = true;
        }
        (req, w)
    };
    if watch_it {
        watch(st);
    }
    req
}

/// A new request of `st`'s, holding its module and communicator.
///
/// # Safety
/// `comm` is `st`'s live communicator and `st.module` its module object.
pub unsafe fn new_request(st: &Server, comm: *mut OmpiComm, persistent: bool) -> *mut Request {
    // SAFETY: creates an Open MPI request owned by the caller; it holds
    // our module and its communicator so that both outlive it.
    unsafe {
        let r = ffi::hwb_request_new(
            comm,
            persistent as c_int,
            (st as *const Server).cast_mut().cast::<c_void>(),
            Some(start),
            Some(free),
            Some(cancel),
        );
        if !r.is_null() {
            hold(st);
        }
        r
    }
}

/// Takes the communicator's next non-blocking collective tag, as libnbc
/// does for each MPI_Ibarrier and each persistent barrier init: ranks
/// whose barrier is libnbc's (hwbarr not selected there) stay in step with
/// ours, which lets a first exchange see their messages (`lookout`). Taken
/// at the call, in call order: every rank takes the same tags.
fn nbc_tag(st: &Server) -> c_int {
    st.comm.p2p().reserve_nbc_tag()
}

/// MPI_Ibarrier on `st`'s communicator: the request in `out`.
pub fn ibarrier(st: &Server, comm: *mut OmpiComm, out: &mut *mut Request) -> c_int {
    let tag = nbc_tag(st);
    // SAFETY: Open MPI calls MPI_Ibarrier's entry with `st`'s live communicator.
    let r = unsafe { issue(st, comm, null_mut(), Some(tag)) };
    if r.is_null() {
        return ffi::ERROR;
    }
    *out = r;
    ffi::SUCCESS
}

/// MPIX_Barrier_init (4.1) / MPI_Barrier_init (5.0): a persistent barrier
/// request, inactive until started, in `out`.
pub fn barrier_init(st: &Server, comm: *mut OmpiComm, out: &mut *mut Request) -> c_int {
    // SAFETY: Open MPI calls the persistent barrier's entry with `st`'s
    // live communicator.
    let r = unsafe { new_request(st, comm, true) };
    if r.is_null() {
        return ffi::ERROR;
    }
    let tag = nbc_tag(st);
    st.engine.lock().unwrap_or_else(|p| p.into_inner()).persistent_tags.push((r, tag));
    *out = r;
    ffi::SUCCESS
}

/// MPI_Start / MPI_Startall on our persistent requests.
unsafe extern "C" fn start(count: usize, reqs: *mut *mut Request) -> c_int {
    guard("MPI_Start", ffi::ERROR, || {
        for i in 0..count {
            // SAFETY: Open MPI passes `count` of our persistent requests.
            unsafe {
                let r = *reqs.add(i);
                let st = owner(r);
                ffi::hwb_request_activate(r);
                issue(st, st.ompi_comm, r, None);
            }
        }
        ffi::SUCCESS
    })
}

/// req_free: called by MPI_Wait/Test on a completed request, or by
/// MPI_Request_free. Freeing the request of a barrier still in flight is
/// erroneous (MPI 4.1, 6.12: nonblocking and persistent collectives) and
/// refused with MPI_ERR_REQUEST, as libnbc refuses it: the request stays
/// valid, the barrier goes on.
unsafe extern "C" fn free(request: *mut *mut Request) -> c_int {
    guard("request free", ffi::ERROR, || {
        // SAFETY: Open MPI passes a pointer to one of our requests.
        let r = unsafe { *request };
        // SAFETY: one of our requests, not yet released.
        let st = unsafe { owner(r) };
        enum Fate {
            Kept,
            Release,
        }
        let fate = {
            let mut e = st.engine.lock().unwrap_or_else(|p| p.into_inner());
            if e.queue.iter().any(|op| op.req == r) {
                return ffi::MPI_ERR_REQUEST as c_int;
            }
            e.persistent_tags.retain(|&(q, _)| q != r);
            // SAFETY: reads a flag of our live request.
            if e.spare.len() < SPARES && unsafe { ffi::hwb_request_is_persistent(r) } == 0 {
                // SAFETY: completed, and MPI forgets it now: ours to keep.
                unsafe { ffi::hwb_request_retire(r) };
                e.spare.push(r);
                Fate::Kept
            } else {
                Fate::Release
            }
        };
        match fate {
            // SAFETY: drop the hold the request had (after unlocking: it
            // may be the last reference); `st` is not used after this.
            Fate::Kept => unsafe { unhold(st.module, st.ompi_comm) },
            // SAFETY: MPI is done with it and no queue holds it.
            Fate::Release => unsafe { release(r) },
        }
        // SAFETY: the caller's handle.
        unsafe { ffi::hwb_request_forget(request) };
        ffi::SUCCESS
    })
}

/// Collective operations cannot be cancelled (MPI 4.1, 6.12): refused
/// with MPI_ERR_REQUEST, as libnbc refuses it.
unsafe extern "C" fn cancel(_req: *mut Request, _complete: c_int) -> c_int {
    ffi::MPI_ERR_REQUEST as c_int
}

// --- progress: the modules with operations in flight ---

static WATCHED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static WATCHING: AtomicUsize = AtomicUsize::new(0);
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Have progress advance `st` until its queue drains.
fn watch(st: &Server) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    let p = st as *const Server as usize;
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
fn forget(st: &Server) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    let p = st as *const Server as usize;
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
                let st = unsafe { &*(p as *const Server) };
                let mut e = match st.engine.try_lock() {
                    Ok(e) => e,
                    Err(TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(TryLockError::WouldBlock) => return true,
                };
                let before = e.finished;
                advance(st, &mut e);
                events += (e.finished - before) as c_int;
                e.watched = !e.queue.is_empty();
                e.watched
            });
            WATCHING.store(w.len(), Release);
        }
            events
    })
}
