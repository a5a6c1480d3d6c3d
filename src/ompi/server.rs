//! The Rust state of an hwbarr module object (`ompi::module`): one
//! communicator's barrier state (`comm`), its barriers in flight — a lone
//! device barrier in the express lane (`express`), the others queued
//! (`engine`) — and the Open MPI objects they belong to. Dropped when Open
//! MPI destroys the module (communicator freed, MPI_Finalize).

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Mutex, MutexGuard};

use crate::barrier::{self, device, Op};
use crate::comm::{Comm, Core, LinePolls, Route};
use crate::contention::Waiting;
use crate::engine::{Outcome, Queue};
use crate::express::{Express, Polled, Watch};
use crate::ompi::ffi::{self, ompi_communicator_t as OmpiComm, ompi_request_t as Request, Module};
use crate::ompi::progress::{self, Advanced, Watched};
use crate::ompi::probe::{self, Point};
use crate::ompi::report;
use crate::p2p::pml::Pml;
use crate::wait::{self, StartWindow, WaitPolicy};

/// Serves the barriers of one communicator: the blocking direct path, the
/// express lane (one device barrier in flight, no lock) and the queue of
/// barriers in flight.
pub struct Server {
    pub(crate) module: *mut Module,
    pub(crate) ompi_comm: *mut OmpiComm,
    pub comm: Comm<Pml>,
    /// Barriers issued but not finished (non-blocking ones, or a blocking
    /// one that had to queue behind them), and the requests kept for them.
    inner: Mutex<Inner>,
    /// The queue is not empty: the blocking direct path must not overtake it.
    queued: AtomicBool,
    /// A device barrier issued with nothing queued: entered at once, and
    /// completed by the progress pass that sees it released, without the
    /// queue's lock. Whoever takes the lock moves it to the queue's head
    /// (`lock`), so that barriers issued behind it queue after it.
    express: Express<device::Ticket, *mut Request>,
    /// In the progress callback's list (`ompi::progress`): armed by whoever
    /// gives progress something to do, disarmed by the pass that drops the
    /// state from the list (`Watched::advance_watched`).
    watch: Watch,
    /// Progress passes in a row that found nothing in flight (only the
    /// pass holding the progress list touches it).
    idle_passes: AtomicU32,
    /// How this communicator's express starts look for their release before
    /// they leave it to progress (`wait::StartWindow`). Polls only on the
    /// line core: the other cores' barriers gained nothing from them (2
    /// ranks, Open MPI 4.1.4, persistent barriers bound apart), and the
    /// counter's MPI_Ibarrier lost (0.35 µs with them, 0.32 without,
    /// unbound), where the line's persistent barrier went from 0.23 to
    /// 0.19 µs (docs/benchmarks.md, "Nonblocking starts: a short window
    /// before progress"). The yield of a shared core paid on every core.
    start_window: StartWindow,
}

/// Progress passes a state with nothing in flight stays in the list: a
/// loop of persistent barriers or MPI_Ibarrier issues its next one without
/// taking the list's lock to come back, and a communicator that is done
/// costs this many passes, then nothing.
const LINGER_PASSES: u32 = 256;

/// What `Server::inner` guards.
#[derive(Default)]
pub(crate) struct Inner {
    pub queue: Queue<Pml, *mut Request>,
    /// Requests of ours kept for reuse, and persistent requests' tags.
    pub requests: Pool,
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
            inner: Mutex::new(Inner::default()),
            queued: AtomicBool::new(false),
            express: Express::default(),
            watch: Watch::default(),
            idle_passes: AtomicU32::new(0),
            start_window: StartWindow::default(),
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

    /// The queue and requests, locked (a panic caught while the lock was
    /// held poisons it; the state itself is still sound), with the express
    /// lane's barrier moved to the queue: whatever the holder queues goes
    /// behind it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.adopt(&mut g);
        g
    }

    /// As `lock`, or None if another thread holds it (progress skips it).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, Inner>> {
        let mut g = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        self.adopt(&mut g);
        Some(g)
    }

    /// Moves the express lane's barrier, if any, to the head of the queue
    /// (empty while the lane holds one). `take_queued` raises `queued`
    /// before it empties the lane, so that no reader (the direct path, an
    /// express start, progress deciding to drop us) sees neither.
    fn adopt(&self, inner: &mut Inner) {
        match self.express.take_queued(&self.queued) {
            Some((req, t)) => inner.queue.push_entered(req, Op::Device(t)),
            None => self.queued.store(!inner.queue.is_empty(), SeqCst),
        }
    }

    /// Starts the barrier of `req` in the express lane, if it may take it:
    /// a device route, nothing queued or in the lane, the communicator not
    /// broken. Entered at once; completed here if released by then or
    /// within the start's window (`wait::StartWindow`), else by progress. False: the caller queues it.
    pub(crate) fn start_express(&self, req: *mut Request) -> bool {
        let c = &self.comm;
        let Some(Route::Device(core)) = c.route() else { return false };
        if c.broken().is_some() || !self.express.idle(&self.queued) {
            return false;
        }
        // A panic here (a bug of hwbarr's) fails the communicator and
        // completes the request with the error (`Comm::contained`).
        match c.failing(c.contained(|| Ok(device::enter(c, core)))) {
            Ok(t) => self.express_entered(req, core, t),
            Err(rc) => self.finish_express(req, Err(rc), Finisher::Issuer),
        }
        true
    }

    /// MPI_Start of a persistent barrier on the line core, where its ranks
    /// keep their cores, with nothing in flight: as `start_express`, with
    /// the arrival first, before the request's activation and any
    /// bookkeeping (as MPI_Barrier's line path, `line_barrier`). None, with
    /// nothing done, where that is not the case; else MPI_Start's code.
    /// What follows the arrival is contained: a panic there fails the
    /// communicator.
    ///
    /// # Safety
    /// `req` is a persistent request of this state's, inactive.
    #[inline(always)]
    pub(crate) unsafe fn line_start(&self, req: *mut Request) -> Option<c_int> {
        let c = &self.comm;
        self.line_polls()?;
        let t = device::line_enter(c)?;
        let started = report::contain(
            || "MPI_Start".into(),
            || {
                // SAFETY: our inactive persistent request (the caller's promise).
                unsafe { ffi::hwb_request_activate(req) };
                self.express_entered(req, Core::Line, t);
            },
        );
        Some(started.map_or_else(|| self.barrier_panicked(), |()| ffi::SUCCESS))
    }

    /// An express start whose arrival `t` is made: completed here if
    /// released at once or within the start's window (`wait::StartWindow`),
    /// else published in the lane for progress.
    fn express_entered(&self, req: *mut Request, core: Core, t: device::Ticket) {
        let c = &self.comm;
        probe::stamp(Point::Arrived);
        let polls_pay = core == Core::Line;
        let looked = c.failing(c.contained(|| {
            Ok(device::released(c, t)? || self.start_window.poll(c.policy(), c.crowd(), polls_pay, || device::released(c, t))?)
        }));
        match looked {
            Ok(false) => {
                self.express.publish(req, t);
                self.watch();
            }
            done => {
                self.finish_express(req, done.map(|_| ()), Finisher::Issuer);
                probe::stamp(Point::DoneAtStart);
            }
        }
    }

    /// An express barrier is over: count it and complete its request.
    fn finish_express(&self, req: *mut Request, outcome: Result<(), c_int>, by: Finisher) {
        match (outcome, by) {
            (Err(_), _) => {}
            (Ok(()), Finisher::Issuer) => self.comm.count_served(),
            // Maybe on another thread while the issuer runs its next
            // barrier: counted apart, atomically.
            (Ok(()), Finisher::Progress) => self.comm.count_served_async(),
        }
        match by {
            // SAFETY: our live request, not complete yet, inside the call
            // that starts it: MPI has not freed it and nobody waits on it.
            Finisher::Issuer => unsafe { ffi::hwb_request_complete_unwaited(req, code(outcome)) },
            // SAFETY: our live request: not complete yet, so MPI has not freed
            // it (`request::free` refuses a request that is not complete);
            // completing wakes whoever waits on it.
            Finisher::Progress => unsafe { ffi::hwb_request_complete(req, code(outcome)) },
        }
    }

    /// Has progress look after this state's barriers in flight.
    pub(crate) fn watch(&self) {
        // The caller published its barrier with a SeqCst write (the lane's,
        // or `queued`), as `Watch` needs.
        if self.watch.arm() {
            // SAFETY: the list holds the state by address; it leaves the
            // list before the state is dropped (`hwbarr_module_state_drop`
            // calls `progress::forget`), so the address is never used after.
            unsafe { progress::watch(&*(self as *const Server)) };
        }
    }

    /// How a barrier of ours in flight waits between progress passes
    /// (`contention::Waiting`).
    fn waiting(&self) -> Waiting {
        let p = self.comm.policy();
        if !p.keeps_core() {
            Waiting::SharedCore
        } else if p.adapts {
            Waiting::OwnCore
        } else {
            Waiting::Nothing
        }
    }

    /// Barriers in flight: in the express lane or queued.
    pub(crate) fn in_flight(&self) -> bool {
        !self.express.idle(&self.queued)
    }

    /// Advances the queue, completing the requests that finish, and
    /// publishes whether anything is still queued.
    pub(crate) fn advance(&self, inner: &mut Inner) {
        inner.queue.advance(&self.comm, &mut |r, rc| {
            // SAFETY: our live request; completing wakes whoever waits on it.
            unsafe { ffi::hwb_request_complete(r, rc) }
        });
        self.queued.store(!inner.queue.is_empty(), SeqCst);
    }

    /// MPI_Barrier on this communicator: directly on the agreed route when
    /// nothing is in flight, else (the first exchange, or behind barriers
    /// in flight) through the queue.
    pub fn barrier(&self) -> c_int {
        let c = &self.comm;
        if let Some(rc) = c.broken() {
            // hwbarr's exchanges failed here: every later barrier fails.
            return rc;
        }
        probe::stamp(Point::BarrierIn);
        let rc = match c.route() {
            Some(route) if self.express.idle(&self.queued) => {
                direct_fault();
                code(barrier::run(c, route))
            }
            _ => self.queued_barrier(),
        };
        probe::stamp(Point::BarrierOut);
        rc
    }

    /// The line paths' (`line_barrier`, `line_start`) checks: the first
    /// round (`Comm::line_polls`) where the communicator takes them (the
    /// line core, its ranks keeping their cores) and `line_clear`; else
    /// None.
    #[inline(always)]
    fn line_polls(&self) -> Option<LinePolls> {
        let c = &self.comm;
        let line = c.line_polls()?;
        self.line_clear().then_some(line)
    }

    /// The line paths' checks after the first: the communicator is not
    /// broken and has nothing in flight; never in fault-injection builds,
    /// whose faults the contained paths report.
    #[inline(always)]
    fn line_clear(&self) -> bool {
        !cfg!(feature = "fault-injection") && self.comm.broken().is_none() && self.express.idle(&self.queued)
    }

    /// MPI_Barrier on the line core with nothing in flight
    /// (`device::line_barrier`); None, with nothing done, where it does not
    /// take that path (`Comm::line_polls`: another route, waiters that give
    /// their cores up, or threads that may crowd: `crowd_line_barrier`), on
    /// a broken communicator or with barriers in flight. Runs outside the
    /// panic containment (it cannot panic); a barrier its first polls did
    /// not see released goes on in `line_wait`, contained. Not in a build
    /// with fault injection, whose faults fire on the contained path
    /// (`barrier`).
    #[inline(always)]
    pub fn line_barrier(&self) -> Option<c_int> {
        let line = self.line_polls()?;
        self.line_barrier_with(line)
    }

    /// MPI_Barrier's line path where threads of a rank may wait at once
    /// (MPI_THREAD_MULTIPLE; `Comm::crowd_line_polls`), taken by a thread
    /// that found no other of its process in hwbarr's crowded loop
    /// (`wait::threads_waiting`; one that starts waiting just after only
    /// misses this thread's polls in its count), as `line_barrier` else.
    /// Out of line, after `line_barrier` said None: that path stays as
    /// short as it was.
    #[inline(never)]
    pub fn crowd_line_barrier(&self) -> Option<c_int> {
        let line = self.comm.crowd_line_polls()?;
        if wait::threads_waiting() > 0 || !self.line_clear() {
            return None;
        }
        let rc = self.line_barrier_with(line);
        if rc == Some(ffi::SUCCESS) {
            self.comm.count_served_lone();
        }
        rc
    }

    /// The line path's barrier with the first round `line`, its checks made.
    #[inline(always)]
    fn line_barrier_with(&self, line: LinePolls) -> Option<c_int> {
        let c = &self.comm;
        probe::stamp(Point::BarrierIn);
        Some(match device::line_barrier(c, line)? {
            Ok(()) => {
                c.count_served();
                probe::stamp(Point::BarrierOut);
                ffi::SUCCESS
            }
            Err(t) => self.line_wait(t),
        })
    }

    /// The rest of a line barrier whose first polls (`line_barrier`) did
    /// not see it released (`device::line_rest`), contained: then counted,
    /// or the communicator failed, as `barrier` does. Out of line: the
    /// fast path stays short.
    #[inline(never)]
    fn line_wait(&self, t: device::Ticket) -> c_int {
        let c = &self.comm;
        let rc = report::contain(
            || "MPI_Barrier".into(),
            || {
                let r = c.failing(device::line_rest(c, t));
                if r.is_ok() {
                    c.count_served();
                }
                code(r)
            },
        )
        .unwrap_or_else(|| self.barrier_panicked());
        probe::stamp(Point::BarrierOut);
        rc
    }

    /// After a panic in MPI_Barrier or in MPI_Start's line path: fails the
    /// communicator, contained too.
    #[cold]
    #[inline(never)]
    pub(crate) fn barrier_panicked(&self) -> c_int {
        report::guard("a barrier's failure", ffi::ERROR, || {
            self.comm.fail(ffi::ERROR);
            ffi::ERROR
        })
    }

    /// MPI_Barrier behind barriers in flight (queued, or in the express
    /// lane, which the lock moves to the queue), or the first one: queue it
    /// and turn progress until it is finished.
    fn queued_barrier(&self) -> c_int {
        let id = {
            let mut inner = self.lock();
            let id = inner.queue.push(None, None);
            self.advance(&mut inner);
            id
        };
        let mut end = Outcome::Pending;
        wait::wait_until(
            WaitPolicy::TURN_PROGRESS_AND_YIELD,
            || {
                let mut inner = self.lock();
                self.advance(&mut inner);
                end = inner.queue.outcome(&self.comm, id);
                if end == Outcome::LinearTurn {
                    self.queued.store(!inner.queue.is_empty(), SeqCst);
                }
                end != Outcome::Pending
            },
            ffi::progress,
            || {},
        );
        match end {
            Outcome::Finished(rc) => rc,
            // Our turn, on a linear route: hwbarr's blocking linear barrier
            // serves this one, outside our lock, as on every peer.
            _ => code(barrier::run(&self.comm, self.comm.route().expect("a linear route"))),
        }
    }
}

impl Watched for Server {
    fn advance_watched(&self) -> Advanced {
        let mut finished = 0;
        // The express lane without a lock: the common case.
        let c = &self.comm;
        if let Polled::Claimed(req, outcome) = self.express.poll(|t| c.failing(c.contained(|| device::tested(c, t)))) {
            probe::stamp(Point::Seen);
            self.finish_express(req, outcome, Finisher::Progress);
            probe::stamp(Point::Completed);
            finished += 1;
        }
        if self.queued.load(SeqCst) {
            match self.try_lock() {
                Some(mut inner) => {
                    let before = inner.queue.finished();
                    self.advance(&mut inner);
                    finished += inner.queue.finished() - before;
                }
                // Another thread holds the queue: look again next pass.
                None => return Advanced { finished, stays: true, waiting: self.waiting() },
            }
        }
        if self.in_flight() {
            self.idle_passes.store(0, Relaxed);
            return Advanced { finished, stays: true, waiting: self.waiting() };
        }
        let idle = self.idle_passes.load(Relaxed) + 1;
        if idle < LINGER_PASSES {
            self.idle_passes.store(idle, Relaxed);
            return Advanced { finished, stays: true, waiting: Waiting::Nothing };
        }
        // Nothing in flight for a while: leave the list, unless a barrier
        // was issued since that look (its issuer saw the mark still set).
        self.idle_passes.store(0, Relaxed);
        Advanced { finished, stays: !self.watch.disarm(|| self.in_flight()), waiting: Waiting::Nothing }
    }
}

// SAFETY: Open MPI's objects behind the raw pointers (module, communicator,
// requests) may be used from any thread; everything else is atomics, locks
// or fixed after enable.
unsafe impl Sync for Server {}

/// Who completes an express barrier: its issuer inside the MPI_Start or
/// MPI_Ibarrier that started it (released by then or within its window),
/// before the caller has the request back, or a progress pass, maybe on
/// another thread, maybe with a waiter to wake.
#[derive(Clone, Copy)]
enum Finisher {
    Issuer,
    Progress,
}

/// The requests a module keeps besides those in its queue.
#[derive(Default)]
pub(crate) struct Pool {
    /// Retired MPI_Ibarrier requests kept for reuse (no module reference).
    pub spare: Vec<*mut Request>,
    /// Each live persistent barrier request's tag, taken at its init.
    pub persistent_tags: Vec<(*mut Request, c_int)>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        for mut r in self.spare.drain(..) {
            // SAFETY: a retired request of ours that nobody else knows.
            unsafe { ffi::hwb_request_release(&mut r) };
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Progress's list no longer holds us (`hwbarr_module_state_drop`
        // takes us out before the state becomes ours to drop).
        self.comm.report_served();
        let w = self.start_window.counts();
        if w.made + w.skipped > 0 {
            self.comm.report_rank(&format!(
                "nonblocking starts looked for their release {} times before progress and saw it {} times; \
                 {} starts did not look, after looks whose peers came late",
                w.made, w.seen, w.skipped
            ));
        }
    }
}

/// Test builds only (`--features fault-injection`): HWBARR_FAULT_PANIC=<n>
/// (or `<rank>:<n>,...`) makes this rank's n-th blocking barrier on the
/// direct path panic before it arrives, standing for a bug of hwbarr's on
/// the device's fast path. Default builds compile it out.
#[cfg(feature = "fault-injection")]
fn direct_fault() {
    static DIRECT: crate::p2p::pml::fault::Trigger = crate::p2p::pml::fault::Trigger::new("HWBARR_FAULT_PANIC");
    if let Some((n, _)) = DIRECT.fires() {
        crate::ompi::report::verbose(0, &format!("fault injection: barrier {n} on the direct path of this rank panics"));
        panic!("injected panic at direct barrier {n}");
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn direct_fault() {}

fn code(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(ffi::SUCCESS)
}
