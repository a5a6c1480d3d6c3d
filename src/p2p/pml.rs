//! `P2p` over Open MPI's point-to-point engine (PML), on the barrier tag
//! of collective components (`MCA_COLL_BASE_TAG_BARRIER`).

use std::cell::Cell;
use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};

use super::{P2p, ANY_SOURCE, ERROR, SUCCESS};
use crate::ompi::ffi::{self, ompi_communicator_t as Comm, ompi_request_t as Request, MCA_COLL_BASE_TAG_BARRIER as TAG};

const _: () = assert!(ANY_SOURCE == ffi::MPI_ANY_SOURCE && SUCCESS == ffi::SUCCESS && ERROR == ffi::ERROR);

/// A communicator's point-to-point view.
#[derive(Clone, Copy)]
pub struct Pml {
    comm: *mut Comm,
    /// MPI_THREAD_MULTIPLE: this process's sends take turns (`SendTurn`).
    take_turns: bool,
}

// SAFETY: a communicator pointer; Open MPI's PML may be called from any
// thread inside an MPI call, which is where hwbarr runs.
unsafe impl Send for Pml {}
// SAFETY: as above; `Pml` holds no state of its own.
unsafe impl Sync for Pml {}

impl Pml {
    /// The point-to-point view of `comm`.
    ///
    /// # Safety
    /// `comm` is a live communicator that stays alive while this view (or
    /// a copy) is used: the module serving it, and each request of that
    /// module, hold it.
    pub unsafe fn new(comm: *mut Comm) -> Pml {
        // SAFETY: reads a flag MPI_Init (or the first session) set before
        // any communicator chose its collectives.
        let take_turns = unsafe { ffi::hwb_mpi_thread_multiple() } != 0;
        Pml { comm, take_turns }
    }

    /// This process's turn to start a send, if its sends take turns.
    fn turn(&self) -> Option<SendTurn> {
        self.take_turns.then(SendTurn::take).flatten()
    }

    /// Starts sending `data` to `dst` in this process's turn.
    ///
    /// # Safety
    /// `data` stays valid, unmoved, until the request returned completes.
    unsafe fn start_send(&self, data: &[u64], dst: c_int) -> Result<*mut Request, c_int> {
        let mut req = null_mut();
        let turn = self.turn();
        // SAFETY: the buffer is valid for its length, and stays so until
        // the request completes (the caller's promise); `comm` is live.
        let rc = unsafe { ffi::hwb_pml_isend(data.as_ptr().cast(), data.len() * 8, dst, TAG, self.comm, &mut req) };
        drop(turn);
        check(rc).map(|()| req)
    }
}

/// Under MPI_THREAD_MULTIPLE hwbarr's sends in a process start one at a
/// time. Open MPI 6.0.0a1's shared-memory transport (btl/sm) numbers a
/// message it writes into a peer's fast box after leaving the lock that
/// reserved its room, so two threads sending to the same peer at once can
/// number their messages out of order, or the same: the peer then waits
/// forever for the number it expects, and every later message from this
/// process to it waits behind (docs/testing.md, "A first barrier that never
/// ended on 6.0.0a1"). A rank's threads that set up their communicators'
/// devices at once send to the same peers at once. The turn covers the
/// call that starts a send, never a wait; it costs one uncontended lock
/// per send where threads may send at once, and nothing otherwise. It
/// cannot keep the program's own sends from racing each other or ours.
static SENDING: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread holds `SENDING` (a send started from inside another's
    /// start, should Open MPI ever turn progress there, must not wait for
    /// itself).
    static HOLDS_TURN: Cell<bool> = const { Cell::new(false) };
}

/// A thread's turn to start a send; the next thread's comes when it drops.
struct SendTurn {
    _held: MutexGuard<'static, ()>,
}

impl SendTurn {
    /// Waits for the turn; None if this thread holds it already.
    fn take() -> Option<SendTurn> {
        if HOLDS_TURN.with(Cell::get) {
            return None;
        }
        // A panic while the lock was held poisons it; it guards nothing.
        let g = SENDING.lock().unwrap_or_else(|p| p.into_inner());
        HOLDS_TURN.with(|h| h.set(true));
        Some(SendTurn { _held: g })
    }
}

impl Drop for SendTurn {
    fn drop(&mut self) {
        HOLDS_TURN.with(|h| h.set(false));
    }
}

/// Test builds only (`--features fault-injection`): HWBARR_FAULT_P2P=<n>
/// (or `<rank>:<n>,...`) makes this rank's n-th point-to-point operation
/// fail with OMPI_ERROR and post nothing; `<n>p` makes it panic instead (a
/// bug of hwbarr's at that point). Default builds compile it out.
#[cfg(feature = "fault-injection")]
pub(crate) mod fault {
    use std::ffi::c_int;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::OnceLock;

    /// This rank's entry of the fault spec in `var` (`<n>`, or
    /// `<rank>:<n>,...`; `<n>p`: panic instead of failing): n and whether
    /// it panics.
    fn target_of(var: &str) -> Option<(u64, bool)> {
        let spec = std::env::var(var).ok()?;
        let rank = crate::ompi::report::world_rank().unwrap_or_default();
        let parse = |n: &str| {
            let n = n.trim();
            let (n, panics) = n.strip_suffix('p').map_or((n, false), |n| (n, true));
            n.parse().ok().map(|n| (n, panics))
        };
        spec.split(',').find_map(|item| match item.split_once(':') {
            None => parse(item),
            Some((r, n)) if r.trim() == rank => parse(n),
            Some(_) => None,
        })
    }

    /// A fault switch: the environment variable naming this rank's n-th
    /// event (read once), and the events counted so far.
    pub struct Trigger {
        var: &'static str,
        target: OnceLock<Option<(u64, bool)>>,
        count: AtomicU64,
    }

    impl Trigger {
        pub const fn new(var: &'static str) -> Trigger {
            Trigger { var, target: OnceLock::new(), count: AtomicU64::new(0) }
        }

        /// Counts one event: `Some((n, panics))` if it is the n-th the
        /// switch names.
        pub fn fires(&self) -> Option<(u64, bool)> {
            let (n, panics) = (*self.target.get_or_init(|| target_of(self.var)))?;
            (self.count.fetch_add(1, Relaxed) + 1 == n).then_some((n, panics))
        }
    }

    /// Counts one operation; `Some(error)` if it is the one to fail.
    pub fn injected() -> Option<c_int> {
        static P2P: Trigger = Trigger::new("HWBARR_FAULT_P2P");
        let (n, panics) = P2P.fires()?;
        let how = if panics { "panics" } else { "fails" };
        // Level 0: always shown (test builds only).
        crate::ompi::report::verbose(0, &format!("fault injection: point-to-point operation {n} of this rank {how}"));
        assert!(!panics, "injected panic at point-to-point operation {n}");
        Some(crate::ompi::ffi::ERROR)
    }
}

#[cfg(not(feature = "fault-injection"))]
mod fault {
    /// Default builds: no fault injection.
    #[inline(always)]
    pub fn injected() -> Option<std::ffi::c_int> {
        None
    }
}


fn check(rc: c_int) -> Result<(), c_int> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// A PML request and the buffer it reads or writes.
///
/// The buffer belongs to the request until the PML completes it. Dropping
/// an `Op` whose request is still posted (only on error paths: a peer that
/// never sends, a barrier abandoned after a failure, a failure notice not
/// yet delivered) therefore leaks the buffer and the request on purpose:
/// freeing the buffer would let a later matching message write into freed
/// memory, waiting could block forever, and the request may outlive the
/// PML (states are dropped as Open MPI tears communicators down). This is
/// the one place where hwbarr leaks memory; a communicator in that state
/// is marked broken and posts nothing more.
pub struct Op {
    req: *mut Request,
    buf: Option<Box<[u64]>>,
}

impl Drop for Op {
    fn drop(&mut self) {
        if !self.req.is_null() {
            std::mem::forget(self.buf.take());
        }
    }
}

// SAFETY: the request is an Open MPI object usable from any thread; the
// buffer is ours.
unsafe impl Send for Op {}

impl P2p for Pml {
    type Op = Op;

    fn isend(&self, data: Box<[u64]>, dst: c_int) -> Result<Op, c_int> {
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
        // SAFETY: the boxed buffer (its heap memory does not move) is
        // owned by the `Op` returned, which keeps it until the request
        // completes (see `Op`).
        let req = unsafe { self.start_send(&data, dst) }?;
        Ok(Op { req, buf: Some(data) })
    }

    fn irecv(&self, words: usize, src: c_int) -> Result<Op, c_int> {
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
        let mut buf: Box<[u64]> = vec![0; words].into();
        let mut req = null_mut();
        // SAFETY: as in `isend`; the buffer is writable for its length.
        let rc = unsafe { ffi::hwb_pml_irecv(buf.as_mut_ptr().cast(), words * 8, src, TAG, self.comm, &mut req) };
        check(rc)?;
        Ok(Op { req, buf: Some(buf) })
    }

    fn test(&self, op: &mut Op) -> Result<Option<Box<[u64]>>, c_int> {
        if op.req.is_null() {
            return Err(ERROR);
        }
        let mut err = SUCCESS;
        // SAFETY: a live request returned by the PML; it is freed and
        // nulled once complete, after which its buffer is ours again.
        // Under fault tolerance a request Open MPI failed (a dead peer, a
        // revoked communicator) completes with its error too.
        if unsafe { ffi::hwb_request_done(&mut op.req, &mut err) } == 0 {
            return Ok(None);
        }
        check(err)?;
        Ok(op.buf.take())
    }

    fn send(&self, data: &[u64], dst: c_int) -> Result<(), c_int> {
        if self.take_turns {
            // Started in this process's turn, waited for outside it; the
            // isend under it counts as the one operation for fault injection.
            let mut flight = super::Flight::new(*self);
            flight.send(data, dst)?;
            return flight.wait();
        }
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
        // SAFETY: the buffer is valid for its length for the whole
        // (blocking) call; `comm` is live.
        check(unsafe { ffi::hwb_pml_send(data.as_ptr().cast(), data.len() * 8, dst, TAG, self.comm) })
    }

    fn recv(&self, buf: &mut [u64], src: c_int) -> Result<(), c_int> {
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
        // SAFETY: as in `send`; the buffer is writable for its length.
        check(unsafe { ffi::hwb_pml_recv(buf.as_mut_ptr().cast(), buf.len() * 8, src, TAG, self.comm) })
    }

    fn reserve_nbc_tag(&self) -> c_int {
        // SAFETY: `comm` is live; the shim takes one tag atomically.
        unsafe { ffi::hwb_nbc_reserve_tag(self.comm) }
    }

    fn probe(&self, tag: Option<c_int>) -> Option<(c_int, usize)> {
        let (mut src, mut bytes) = (0, 0);
        // SAFETY: `comm` is live; the shim writes the two out-values only.
        let found = unsafe { ffi::hwb_pml_iprobe(tag.unwrap_or(TAG), self.comm, &mut src, &mut bytes) };
        (found != 0).then_some((src, bytes))
    }

    fn progress(&self) -> crate::wait::Turn {
        ffi::progress()
    }

    fn host(&self) -> String {
        hostname()
    }

    fn name(&self) -> String {
        // SAFETY: c_name is a NUL-terminated array inside the live communicator.
        unsafe { std::ffi::CStr::from_ptr(ffi::hwb_comm_name(self.comm)) }.to_string_lossy().into_owned()
    }
}

/// This host's name (per UTS namespace, so fake nodes differ too).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::from("?");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
