//! The point-to-point transport hwbarr's own protocols run on: the first
//! exchange (`bootstrap`, `topo`), the leaders' barriers (`inter`), the
//! local phases without a device (`hier`) and the linear barrier.
//!
//! The protocols see a communicator only through `P2p`, so that they run
//! over Open MPI's PML in the component (`pml::Pml`) and over an in-memory
//! network in unit tests (`mem`). Every non-blocking operation owns its
//! buffer until it completes: no safe function here depends on its caller
//! keeping memory alive. `Flight` is the set of operations a protocol step
//! has in flight.
//!
//! Every receive has room for at least one word, so that a failure notice
//! (`FAILED` or `FAILED_LATER`, sent by `Comm::fail` in place of the next
//! message a peer expects) is told apart from a zero-byte signal: a receive
//! that gets one fails like a failed operation.

use std::ffi::c_int;

use crate::wait::{self, WaitPolicy};

#[cfg(test)]
pub mod mem;
pub mod pml;

/// Open MPI's success code (`OMPI_SUCCESS`); errors are its negative codes.
pub const SUCCESS: c_int = 0;
/// Open MPI's generic error code (`OMPI_ERROR`).
pub const ERROR: c_int = -1;
/// Receive from any rank (`MPI_ANY_SOURCE`).
pub const ANY_SOURCE: c_int = -1;

/// The error classes of Open MPI's fault tolerance (ULFM, 5.0 and later;
/// fixed values of its mpi.h): MPI_ERR_PROC_FAILED,
/// MPI_ERR_PROC_FAILED_PENDING, MPI_ERR_REVOKED. Every process learns of
/// such a failure from Open MPI itself (`comm::Comm::revoked`).
pub const PROCESS_FAILURE_ERRORS: [c_int; 3] = [75, 76, 77];

/// Whether `rc` reports a failed process or a revoked communicator.
pub fn is_process_failure(rc: c_int) -> bool {
    PROCESS_FAILURE_ERRORS.contains(&rc)
}

/// A failure notice: the whole message a rank sends, in place of the next
/// one a peer expects from it, once hwbarr's exchanges on a communicator
/// failed there (`Comm::fail`). Its first word never begins a message of
/// another kind: not a first-exchange greeting (`exchange::words`), and no
/// node id or signal is this large. Every protocol version keeps it, and
/// takes any word with its magic as a notice. This one: its sender's first
/// barrier on the communicator was not over (and every notice of older
/// versions).
pub const FAILED: u64 = (FAILED_MAGIC << 32) | 1;
/// A failure notice from a rank whose first barrier on the communicator
/// was over: it is for a later barrier. A rank still in its first
/// exchange gets that exchange's last message from rank 0 all the same
/// (rank 0 had heard from every rank, and sends each its answer, or a
/// notice where a send fails), and fails at its next barrier instead
/// (`exchange::lookout`).
pub const FAILED_LATER: u64 = (FAILED_MAGIC << 32) | 2;
const FAILED_MAGIC: u64 = 0x4857_4641; // "HWFA"

/// Whether a received message is a failure notice.
pub fn is_failure(first_word: u64) -> bool {
    first_word >> 32 == FAILED_MAGIC
}

/// A communicator as hwbarr's protocols see it: zero- or few-word messages
/// between its ranks, on hwbarr's one tag.
pub trait P2p: Clone {
    /// A non-blocking operation in flight. It owns its buffer, and dropping
    /// one that has not completed is sound: the implementation keeps the
    /// buffer for as long as the transport may still touch it (Open MPI's
    /// leaks it: see `pml::Op`).
    type Op;

    /// Starts sending `data` to `dst`.
    fn isend(&self, data: Box<[u64]>, dst: c_int) -> Result<Self::Op, c_int>;
    /// Starts receiving up to `words` words from `src` (or `ANY_SOURCE`);
    /// a shorter message leaves the remaining words 0.
    fn irecv(&self, words: usize, src: c_int) -> Result<Self::Op, c_int>;
    /// Polls `op`: `Ok(Some(buffer))` once it completed (for a receive, the
    /// data). An operation that completed (or failed) is not polled again.
    fn test(&self, op: &mut Self::Op) -> Result<Option<Box<[u64]>>, c_int>;

    /// Sends `data` to `dst`, returning when its buffer may be reused.
    fn send(&self, data: &[u64], dst: c_int) -> Result<(), c_int>;
    /// Receives into `buf` from `src` (or `ANY_SOURCE`), blocking.
    fn recv(&self, buf: &mut [u64], src: c_int) -> Result<(), c_int>;

    /// Takes the tag that the next non-blocking collective of another
    /// component on this communicator would get, and returns it (Open MPI's
    /// `ompi_coll_base_nbc_reserve_tags`, as libnbc does for MPI_Ibarrier).
    fn reserve_nbc_tag(&self) -> c_int;
    /// A message waiting here unreceived (MPI_Iprobe from any source) on
    /// `tag`, or on hwbarr's own tag if None: its source and size in bytes.
    fn probe(&self, tag: Option<c_int>) -> Option<(c_int, usize)>;

    /// Lets pending operations advance (Open MPI's progress engine) and
    /// says what the turn did.
    fn progress(&self) -> crate::wait::Turn;
    /// This rank's node, as its host name (fake nodes differ too).
    fn host(&self) -> String;
    /// The communicator's name, for messages.
    fn name(&self) -> String;
}

/// Receives a signal (a zero-byte message) from `src`, blocking: an error
/// if it is a failure notice.
pub fn recv_signal(p2p: &impl P2p, src: c_int) -> Result<(), c_int> {
    let mut w = [0u64];
    p2p.recv(&mut w, src)?;
    if is_failure(w[0]) {
        return Err(ERROR);
    }
    Ok(())
}

/// Sends a failure notice (`FAILED` or `FAILED_LATER`) to `peer`, without
/// waiting: it may never receive it (it had nothing more to expect from
/// us). One test right after the send frees its request when the transport
/// completed it at once (a small message usually is); one still in flight
/// is left to complete as progress turns, its request and buffer leaked
/// (`pml::Op`). Best effort: an error is ignored, since the caller is
/// already failing.
pub fn send_notice<P: P2p>(p2p: &P, peer: c_int, notice: u64) {
    debug_assert!(is_failure(notice));
    if let Ok(mut op) = p2p.isend(Box::new([notice]), peer) {
        let _ = p2p.test(&mut op);
    }
}

/// Where a receive's data will be found once its `Flight` is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(usize);

/// The operations a protocol step has in flight on one transport.
pub struct Flight<P: P2p> {
    p2p: P,
    /// In flight, each with the slot its data goes to (receives of words)
    /// and, for a receive, its source (`awaited`).
    ops: Vec<(Option<usize>, Option<c_int>, P::Op)>,
    /// Data of completed receives, by slot.
    got: Vec<Option<Box<[u64]>>>,
}

impl<P: P2p> Flight<P> {
    pub fn new(p2p: P) -> Flight<P> {
        Flight { p2p, ops: Vec::new(), got: Vec::new() }
    }

    /// The transport.
    pub fn p2p(&self) -> &P {
        &self.p2p
    }

    /// Starts sending a copy of `data` to `dst`.
    pub fn send(&mut self, data: &[u64], dst: c_int) -> Result<(), c_int> {
        let op = self.p2p.isend(data.into(), dst)?;
        self.ops.push((None, None, op));
        Ok(())
    }

    /// Starts receiving `words` words from `src`; `take` the slot once done.
    pub fn recv(&mut self, words: usize, src: c_int) -> Result<Slot, c_int> {
        let op = self.p2p.irecv(words, src)?;
        let slot = self.got.len();
        self.got.push(None);
        self.ops.push((Some(slot), Some(src), op));
        Ok(Slot(slot))
    }

    /// Starts receiving a zero-word message (a signal) from `src`, with
    /// room for a failure notice.
    pub fn signal_from(&mut self, src: c_int) -> Result<(), c_int> {
        let op = self.p2p.irecv(1, src)?;
        self.ops.push((None, Some(src), op));
        Ok(())
    }

    /// True when every operation completed; the first error otherwise.
    pub fn done(&mut self) -> Result<bool, c_int> {
        let mut first_err = None;
        let (p2p, got) = (&self.p2p, &mut self.got);
        self.ops.retain_mut(|(slot, src, op)| match p2p.test(op) {
            Ok(None) => true,
            // A receive that got a failure notice (a send's own data is none).
            Ok(Some(buf)) if src.is_some() && buf.first().is_some_and(|&w| is_failure(w)) => {
                first_err.get_or_insert(ERROR);
                false
            }
            Ok(Some(buf)) => {
                if let Some(s) = slot {
                    got[*s] = Some(buf);
                }
                false
            }
            Err(rc) => {
                first_err.get_or_insert(rc);
                false
            }
        });
        match first_err {
            Some(rc) => Err(rc),
            None => Ok(self.ops.is_empty()),
        }
    }

    /// The sources of the receives not complete when `done` last looked,
    /// in the order they were posted.
    pub fn awaited(&self) -> Vec<c_int> {
        self.ops.iter().filter_map(|&(_, src, _)| src).collect()
    }

    /// The data of a completed receive.
    ///
    /// # Panics
    /// If its receive has not completed (call after `done` said so).
    pub fn take(&mut self, slot: Slot) -> Box<[u64]> {
        self.got[slot.0].take().expect("receive completed")
    }

    /// Turns progress until every operation completed.
    pub fn wait(&mut self) -> Result<(), c_int> {
        let p2p = self.p2p.clone();
        wait::try_wait_until(WaitPolicy::TURN_PROGRESS, || self.done(), || p2p.progress(), || {})
    }
}
