//! The Rust state of an hwbarr module object (`ompi::module`): one
//! communicator's barrier state (`comm`) and its queue of barriers in
//! flight (`engine`), with the Open MPI objects they belong to. Dropped
//! when Open MPI destroys the module (communicator freed, MPI_Finalize).

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Mutex, MutexGuard};

use crate::barrier;
use crate::comm::Comm;
use crate::engine::{Outcome, Queue};
use crate::ompi::ffi::{self, ompi_communicator_t as OmpiComm, ompi_request_t as Request, Module};
use crate::ompi::progress::{self, Watched};
use crate::p2p::pml::Pml;
use crate::wait::{self, WaitPolicy};

/// Serves the barriers of one communicator: the blocking direct path and
/// the queue of barriers in flight.
pub struct Server {
    pub(crate) module: *mut Module,
    pub(crate) ompi_comm: *mut OmpiComm,
    pub comm: Comm<Pml>,
    /// Barriers issued but not finished (non-blocking ones, or a blocking
    /// one that had to queue behind them), and the requests kept for them.
    inner: Mutex<Inner>,
    /// The queue is not empty: the blocking direct path must not overtake it.
    queued: AtomicBool,
}

/// What `Server::inner` guards.
#[derive(Default)]
pub(crate) struct Inner {
    pub queue: Queue<Pml, *mut Request>,
    /// Requests of ours kept for reuse, and persistent requests' tags.
    pub requests: Pool,
    /// In the progress callback's list.
    pub watched: bool,
}

impl Server {
    /// The state of the module serving `ompi_comm`.
    ///
    /// # Safety
    /// `ompi_comm` is the live communicator `comm`'s transport talks on;
    /// `module` must be set to the module object that owns this state
    /// before any request is made (`ompi::module::new_module` does).
    pub unsafe fn new(ompi_comm: *mut OmpiComm, comm: Comm<Pml>) -> Server {
        Server { module: null_mut(), ompi_comm, comm, inner: Mutex::new(Inner::default()), queued: AtomicBool::new(false) }
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
    /// held poisons it; the state itself is still sound).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// As `lock`, or None if another thread holds it (progress skips it).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, Inner>> {
        match self.inner.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Advances the queue, completing the requests that finish, and
    /// publishes whether anything is still queued.
    pub(crate) fn advance(&self, inner: &mut Inner) {
        inner.queue.advance(&self.comm, &mut |r, rc| {
            // SAFETY: our live request; completing wakes whoever waits on it.
            unsafe { ffi::hwb_request_complete(r, rc) }
        });
        self.queued.store(!inner.queue.is_empty(), Release);
    }

    /// MPI_Barrier on this communicator: directly on the agreed route when
    /// nothing is queued, else (the first exchange, or behind queued
    /// barriers) through the queue.
    pub fn barrier(&self) -> c_int {
        let c = &self.comm;
        if let Some(rc) = c.broken() {
            // hwbarr's exchanges failed here: every later barrier fails.
            return rc;
        }
        match c.route() {
            Some(route) if !self.queued.load(Acquire) => code(barrier::run(c, route)),
            _ => self.queued_barrier(),
        }
    }

    /// MPI_Barrier behind queued operations, or the first one: queue it and
    /// turn progress until it is finished.
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
                    self.queued.store(!inner.queue.is_empty(), Release);
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
    fn advance_watched(&self) -> Option<(u64, bool)> {
        let mut inner = self.try_lock()?;
        let before = inner.queue.finished();
        self.advance(&mut inner);
        inner.watched = !inner.queue.is_empty();
        Some((inner.queue.finished() - before, inner.watched))
    }
}

// SAFETY: Open MPI's objects behind the raw pointers (module, communicator,
// requests) may be used from any thread; everything else is atomics, locks
// or fixed after enable.
unsafe impl Sync for Server {}

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
        progress::forget(self);
        self.comm.report_served();
    }
}

fn code(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(ffi::SUCCESS)
}
