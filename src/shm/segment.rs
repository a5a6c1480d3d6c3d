//! The node-local barrier device: one shared-memory segment per
//! communicator holding the toggle wires, the DMA counters, the line
//! barrier's wires and the polled barrier's.
//!
//! The segment is an anonymous memfd, never a name in /dev/shm: the creator
//! hands `(pid, fd)` to its peers, which open it through `/proc/<pid>/fd/<fd>`
//! (the kernel allows that only to the same user, and we also chmod it 0600).
//! Once every peer has mapped it the creator closes the fd, and the memory
//! lives exactly as long as some rank maps it. So nothing can be left behind
//! in /dev/shm or in the session directory, however the job ends (SIGKILL
//! included), and no two communicators can ever meet in one segment by name.
//! A process keeps a few freed segments mapped, and a creator their fds, for
//! its next communicators (`shm::kept`); a segment serves another
//! communicator only once every rank that mapped it let it go.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::core::polled::{self, Tree};
use crate::core::toggle::{Shape, Wires};
use crate::shm::kept::{Created, Kept, Key, Mapping, KEPT};
use crate::shm::line_pick::{Announcement, LineTrial, Step};
use crate::sync::Ordering::Relaxed;
use crate::sync::Ordering::{AcqRel, Acquire, Release};
use crate::sync::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Line};
use crate::wait::HelpPace;

const MAGIC: u64 = u64::from_le_bytes(*b"HWBARR01");

/// First line of the segment: what the creator put there, checked by
/// every rank that attaches. The line's second half holds the failure word
/// (`FAILED_AT`).
#[repr(C)]
struct Header {
    magic: u64,
    token: u64,
    ranks: u64,
    len: u64,
}

/// Where the failure word lies: in the header's line, which is written
/// once, so waiters that read it while they poll share it without traffic.
const FAILED_AT: usize = 64;
/// The failure word's value when hwbarr's own exchanges failed.
const FAILED_BY_HWBARR: u32 = 1;
/// Its flag when Open MPI revoked the collectives, over the MPI error.
const REVOKED: u32 = 1 << 31;
const _: () = assert!(std::mem::size_of::<Header>() <= FAILED_AT);
/// Where rank 0 says which of the line barrier's candidate lines the ranks
/// keep (`shm::line_pick`): in the header's line too, written once.
const LINE_PICK_AT: usize = 48;
const _: () = assert!(std::mem::size_of::<Header>() <= LINE_PICK_AT && LINE_PICK_AT + 4 <= FAILED_AT);
/// Where each rank that mapped the segment for its communicator counts
/// itself until it lets go (`shm::kept`): in the header's line, written at
/// the exchange and when the communicator is freed, never in a barrier.
const USERS_AT: usize = 56;
/// Set by the creator at the seal when it keeps the fd open, so that the
/// segment may serve again: only then is a peer's mapping worth keeping.
const KEPT_AT: usize = 60;
const _: () = assert!(LINE_PICK_AT + 4 <= USERS_AT && USERS_AT + 4 <= KEPT_AT && KEPT_AT + 4 <= FAILED_AT);

/// Candidate lines for the line barrier's wires: the ranks try them over
/// their first barriers and keep the fastest (`shm::line_pick`).
pub use crate::shm::line_pick::LINE_SLOTS;

/// Byte offsets of the regions inside a segment for `n` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub ranks: usize,
    pub banks: usize,
    input: usize,
    sleepers: usize,
    banks_at: usize,
    counters_at: usize,
    asleep_at: usize,
    places_at: usize,
    line_at: usize,
    /// Bytes from one candidate line of the line barrier to the next.
    line_stride: usize,
    doorbell: usize,
    own_at: usize,
    entered_at: usize,
    pub len: usize,
}

impl Layout {
    pub fn new(ranks: usize) -> Layout {
        let line = std::mem::size_of::<Line<u64>>();
        // Room for any bank tree: it is chosen once the ranks' places are
        // known (`set_shape`), after the segment exists.
        let banks = Shape::max_banks(ranks);
        let input = line;
        let sleepers = input + line;
        let banks_at = sleepers + line;
        let counters_at = banks_at + banks * line;
        let asleep_at = counters_at + ranks * line;
        let doorbell = asleep_at + ranks * line;
        let line_at = doorbell + line;
        let line_stride = ranks.div_ceil(line) * line;
        let own_at = line_at + LINE_SLOTS * line_stride;
        let entered_at = own_at + ranks * line;
        let places_at = entered_at + ranks * line;
        let end = places_at + ranks * std::mem::size_of::<u64>();
        let page = 4096;
        Layout {
            ranks,
            banks,
            input,
            sleepers,
            banks_at,
            counters_at,
            asleep_at,
            places_at,
            line_at,
            line_stride,
            doorbell,
            own_at,
            entered_at,
            len: end.div_ceil(page) * page,
        }
    }
}

/// What a peer needs to attach to a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    pub pid: u32,
    pub fd: i32,
    pub len: u64,
    pub token: u64,
}

/// A mapped segment.
pub struct Segment {
    base: NonNull<u8>,
    /// The mapping at `base`, until `drop` unmaps or keeps it.
    map: Option<Mapping>,
    layout: Layout,
    /// The creator's memfd, open until every peer attached, and after that
    /// if `fd_kept`.
    fd: Option<OwnedFd>,
    /// The creator's fd stays open after the exchange, counted in `kept`.
    fd_kept: bool,
    /// Peer: the offer that brought it (`shm::kept::Key`).
    key: Option<Key>,
    /// Where it goes when dropped.
    kept: &'static Kept,
    /// The toggle barrier's bank tree and the polled barrier's tree, fixed
    /// when the device is sealed.
    shape: Option<(Shape, Tree)>,
    /// When this process helps the leaders of a polled barrier in flight
    /// (`barrier::device::tested`).
    help: HelpPace,
    /// Where the line barrier's wires lie: the candidate line this rank's
    /// barriers run on (`line_step`), the first until a trial moves them.
    line_wires_at: AtomicUsize,
    /// That candidate line's index.
    line_slot: AtomicU8,
    /// This rank's count on the line barrier's wire, in process memory
    /// (`core::line::arrive`).
    line_mine: AtomicU8,
    /// The trial of the candidate lines, over the first barriers
    /// (`shm::line_pick`); none by default.
    line_trial: LineTrial,
    /// Rank 0, after the trial: (candidates, ns per barrier on the line
    /// picked, on the first line).
    line_tried: OnceLock<(usize, f64, f64)>,
}

// SAFETY: the mapping is plain shared memory accessed only through atomics;
// it may be used and unmapped from any thread.
unsafe impl Send for Segment {}
// SAFETY: as above: `&Segment` only hands out references to atomics.
unsafe impl Sync for Segment {}

fn map(file: &File, len: usize) -> io::Result<Mapping> {
    // SAFETY: a fresh shared mapping of a file we hold open; nothing else
    // in this process aliases it.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping { base: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
}

/// The 32-bit word at `at` in the header line of a segment mapped at `map`.
fn header_word(map: &Mapping, at: usize) -> &AtomicU32 {
    assert!(at + 4 <= 128 && at.is_multiple_of(4) && map.len >= 128);
    // SAFETY: inside the mapping's first line, 4-byte aligned (the mapping
    // starts a page); it lives as long as the borrow of `map`.
    unsafe { &*map.base.as_ptr().add(at).cast::<AtomicU32>() }
}

/// The header of a segment mapped at `map`.
fn header(map: &Mapping) -> Header {
    // SAFETY: the header lies at the start of the mapping, page-aligned.
    unsafe { map.base.cast::<Header>().as_ptr().read() }
}

impl Segment {
    /// A segment mapped at `map`, before its device is sealed; its maker
    /// counts it among the users (`users`) before anything can drop it.
    fn mapped(map: Mapping, layout: Layout, fd: Option<OwnedFd>, kept: &'static Kept) -> Segment {
        let line_wires_at = layout.line_at;
        Segment {
            base: map.base,
            map: Some(map),
            layout,
            fd,
            fd_kept: false,
            key: None,
            kept,
            shape: None,
            help: HelpPace::new(),
            line_wires_at: AtomicUsize::new(line_wires_at),
            line_slot: AtomicU8::new(0),
            line_mine: AtomicU8::new(0),
            line_trial: LineTrial::none(),
            line_tried: OnceLock::new(),
        }
    }

    /// Creates a zeroed segment for `ranks` ranks, stamped with `token`:
    /// one this process kept (`shm::kept`) if nobody uses it any more.
    pub fn create(ranks: usize, token: u64) -> io::Result<Segment> {
        Self::create_in(&KEPT, ranks, token)
    }

    /// `create`, with the segments `kept` keeps.
    pub fn create_in(kept: &'static Kept, ranks: usize, token: u64) -> io::Result<Segment> {
        let layout = Layout::new(ranks);
        let free = |m: &Mapping| header_word(m, USERS_AT).load(Acquire) == 0;
        let spoiled = |m: &Mapping| header_word(m, FAILED_AT).load(Acquire) != 0;
        let seg = match kept.take_created(ranks, free, spoiled) {
            Some(Created { map, fd, .. }) => {
                // SAFETY: every rank that mapped it let it go (the users
                // word read 0, acquiring each one's release), and nothing
                // in this process borrows it: zeroed whole, it is as a
                // fresh memfd's pages are.
                unsafe { std::ptr::write_bytes(map.base.as_ptr(), 0, map.len) };
                let mut seg = Segment::mapped(map, layout, Some(fd), kept);
                seg.fd_kept = true;
                seg
            }
            None => Self::fresh(layout, kept)?,
        };
        // SAFETY: the header lies inside the mapping, which no other
        // process uses, and is suitably aligned (page start).
        unsafe {
            seg.base.cast::<Header>().as_ptr().write(Header {
                magic: MAGIC,
                token,
                ranks: ranks as u64,
                len: layout.len as u64,
            })
        };
        seg.users().store(1, Release);
        Ok(seg)
    }

    /// A new memfd segment, zeroed, without its header.
    fn fresh(layout: Layout, kept: &'static Kept) -> io::Result<Segment> {
        let name = CString::new("hwbarr").unwrap();
        // SAFETY: memfd_create with a valid C string; the fd it returns is
        // ours alone and goes straight into an OwnedFd.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid, open fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let file = File::from(fd);
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        file.set_len(layout.len as u64)?;
        let m = map(&file, layout.len)?;
        Ok(Segment::mapped(m, layout, Some(file.into()), kept))
    }

    /// What peers need to attach (creator only).
    pub fn offer(&self) -> Option<Offer> {
        let fd = self.fd.as_ref()?;
        Some(Offer { pid: std::process::id(), fd: fd.as_raw_fd(), len: self.layout.len as u64, token: self.token() })
    }

    /// Maps the segment a peer offered and checks that it is the one meant:
    /// the mapping this process kept of it if the creator offers it again.
    pub fn attach(offer: &Offer, ranks: usize) -> io::Result<Segment> {
        Self::attach_in(&KEPT, offer, ranks)
    }

    /// `attach`, with the mappings `kept` keeps.
    pub fn attach_in(kept: &'static Kept, offer: &Offer, ranks: usize) -> io::Result<Segment> {
        let layout = Layout::new(ranks);
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        if offer.len != layout.len as u64 {
            return Err(bad("segment size does not match the communicator size"));
        }
        let ours = |m: &Mapping| {
            let h = header(m);
            h.magic == MAGIC && h.token == offer.token && h.ranks == ranks as u64
        };
        let key = (offer.pid, offer.fd, offer.len);
        // A kept mapping of another segment (the creator's fd number came
        // back for a new memfd) reads another token: unmapped here.
        let m = match kept.take_mapped(key).filter(ours) {
            Some(m) => m,
            None => {
                let path = format!("/proc/{}/fd/{}", offer.pid, offer.fd);
                let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
                if file.metadata()?.len() != offer.len {
                    return Err(bad("segment has an unexpected size"));
                }
                let m = map(&file, layout.len)?;
                if !ours(&m) {
                    return Err(bad("segment is not this communicator's"));
                }
                m
            }
        };
        let mut seg = Segment::mapped(m, layout, None, kept);
        seg.users().fetch_add(1, AcqRel);
        seg.key = Some(key);
        Ok(seg)
    }

    /// 1 once the creator kept its fd open at the seal.
    fn kept_word(&self) -> &AtomicU32 {
        self.header_word(KEPT_AT)
    }

    /// The ranks that mapped the segment for its communicator and have not
    /// let it go; every `Segment` counts there from its making to its drop.
    fn users(&self) -> &AtomicU32 {
        self.header_word(USERS_AT)
    }

    /// Once every peer attached: the creator keeps its fd open if the
    /// process's budget allows (`shm::kept`), for a communicator after this
    /// one, or closes it, and then the memory lives only in the ranks'
    /// mappings. `shape`: the toggle barrier's bank tree, `tree`: the
    /// polled barrier's, the same on every rank.
    pub fn seal(&mut self, shape: Shape, tree: Tree) {
        assert!(shape.ranks() == self.layout.ranks && shape.banks() <= self.layout.banks, "a tree the segment holds");
        assert_eq!(tree.ranks(), self.layout.ranks, "a tree for the segment's ranks");
        if self.fd.is_some() && !self.fd_kept {
            if self.kept.take_fd() {
                self.fd_kept = true;
            } else {
                self.fd = None;
            }
        }
        if self.fd_kept {
            // Before any barrier on it: every peer reads it when it lets go.
            self.kept_word().store(1, Release);
        }
        self.shape = Some((shape, tree));
    }

    /// The toggle barrier's bank tree.
    pub fn shape(&self) -> &Shape {
        &self.shape.as_ref().expect("a sealed device").0
    }

    /// The polled barrier's tree.
    pub fn tree(&self) -> &Tree {
        &self.shape.as_ref().expect("a sealed device").1
    }

    /// The polled barrier's wires: two lines per rank (its wire, its
    /// arrival if it leads), and the toggle barrier's input (a
    /// communicator runs one core, so they share it).
    pub fn polled_wires(&self) -> polled::Wires<'_> {
        let l = &self.layout;
        // SAFETY: as in `wires`: inside the mapping, 128-byte aligned,
        // zero-initialised.
        unsafe {
            polled::Wires {
                own: self.slice::<Line<AtomicU32>>(l.own_at, l.ranks),
                entered: self.slice::<Line<AtomicU32>>(l.entered_at, l.ranks),
                input: self.wires().input,
            }
        }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// This process's pace of help for polled barriers in flight.
    pub fn help_pace(&self) -> &HelpPace {
        &self.help
    }

    fn token(&self) -> u64 {
        // SAFETY: the header is written before any Segment is handed out.
        unsafe { self.base.cast::<Header>().as_ptr().read().token }
    }

    /// # Safety
    /// `at + count * size_of::<T>()` must lie inside the mapping, aligned
    /// for T, and the bytes must be valid T (zero is valid for atomics).
    unsafe fn slice<T>(&self, at: usize, count: usize) -> &[T] {
        // SAFETY: the caller guarantees range, alignment and validity; the
        // slice borrows `self`, so it cannot outlive the mapping.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at).cast::<T>(), count) }
    }

    /// The toggle barrier's wires.
    pub fn wires(&self) -> Wires<'_> {
        let l = &self.layout;
        // SAFETY: Layout places the input line and the banks inside the
        // mapping at 128-byte aligned offsets; memfd pages start zeroed,
        // a valid value for atomics.
        unsafe {
            Wires {
                banks: self.slice::<Line<AtomicU64>>(l.banks_at, l.banks),
                input: &self.slice::<Line<AtomicU32>>(l.input, 1)[0].0,
            }
        }
    }

    /// How many ranks sleep on the toggle input (so the FSM's firer knows
    /// whether to make the wake-up system call).
    pub fn sleepers(&self) -> &AtomicU32 {
        // SAFETY: as in `wires`: inside the mapping, aligned, zero-initialised.
        unsafe { &self.slice::<Line<AtomicU32>>(self.layout.sleepers, 1)[0].0 }
    }

    /// Per rank: 1 while it sleeps on its own counter.
    pub fn asleep(&self) -> &[Line<AtomicU32>] {
        // SAFETY: as in `wires`: inside the mapping, aligned, zero-initialised.
        unsafe { self.slice::<Line<AtomicU32>>(self.layout.asleep_at, self.layout.ranks) }
    }

    /// Marks the communicator's barriers failed for every rank mapping the
    /// segment (`Comm::fail`): their waits end with an error. A sleeper
    /// notices within a sleep slice. The first mark stays.
    pub fn set_failed(&self) {
        self.mark_failed(FAILED_BY_HWBARR);
    }

    /// Marks them failed because Open MPI revoked the communicator's
    /// collectives (`Comm::revoked`): the waits end with `code`.
    pub fn set_revoked(&self, code: i32) {
        self.mark_failed(REVOKED | (code as u32 & !REVOKED));
    }

    fn mark_failed(&self, word: u32) {
        use crate::sync::Ordering::{Acquire, Release};
        let _ = self.failed_word().compare_exchange(0, word, Release, Acquire);
    }

    /// Whether some rank marked the barriers failed.
    pub fn failed(&self) -> bool {
        self.failed_word().load(crate::sync::Ordering::Acquire) != 0
    }

    /// The MPI error of a revocation, if the failure mark is one.
    pub fn revoked(&self) -> Option<i32> {
        let w = self.failed_word().load(crate::sync::Ordering::Acquire);
        (w & REVOKED != 0).then_some((w & !REVOKED) as i32)
    }

    fn failed_word(&self) -> &AtomicU32 {
        self.header_word(FAILED_AT)
    }

    /// The 32-bit word at `at` in the header line, past the header.
    fn header_word(&self, at: usize) -> &AtomicU32 {
        assert!(at >= std::mem::size_of::<Header>() && at + 4 <= 128 && at.is_multiple_of(4));
        // SAFETY: in the first line (inside the mapping), past the header,
        // 4-byte aligned, zero-initialised like every word.
        unsafe { &self.slice::<AtomicU32>(at, 1)[0] }
    }

    /// Each rank's place in the node's caches (`topology::Place::word`),
    /// written by each rank before it answers the device exchange, read by
    /// every rank after the verdict.
    pub fn places(&self) -> &[AtomicU64] {
        let l = &self.layout;
        // SAFETY: as in `wires`: inside the mapping, 8-byte aligned (after
        // whole lines), zero-initialised.
        unsafe { self.slice::<AtomicU64>(l.places_at, l.ranks) }
    }

    /// The line barrier's wires, one byte per rank, on as few lines as
    /// hold them: on the candidate line this rank's barriers run on now.
    #[inline(always)]
    pub fn line_wires(&self) -> &[AtomicU8] {
        // SAFETY: as in `wires`: inside the mapping (a candidate line:
        // `line_wires_at` only ever holds one), bytes need no alignment,
        // zero-initialised.
        unsafe { self.slice::<AtomicU8>(self.line_wires_at.load(Relaxed), self.layout.ranks) }
    }

    /// The index of that candidate line, for a barrier's ticket.
    #[inline(always)]
    pub fn line_slot(&self) -> u8 {
        self.line_slot.load(Relaxed)
    }

    /// Candidate line `slot` (below `LINE_SLOTS`) for the line barrier's
    /// wires, as `line_wires`.
    pub fn line_candidate(&self, slot: usize) -> &[AtomicU8] {
        assert!(slot < LINE_SLOTS, "candidate line {slot} of {LINE_SLOTS}");
        let l = &self.layout;
        // SAFETY: as in `line_wires`: the candidate lines lie between
        // `line_at` and `own_at`.
        unsafe { self.slice::<AtomicU8>(l.line_at + slot * l.line_stride, l.ranks) }
    }

    /// Sets up this rank's (`me`) trial of `slots` candidate lines over
    /// the barriers from the next one on (`shm::line_pick`), timed by
    /// `clock` on rank 0. Before any barrier on the device.
    pub fn start_line_trial(&mut self, me: usize, slots: usize, clock: fn() -> u64) {
        self.line_trial = LineTrial::new(me, slots, clock);
    }

    /// Whether the trial of the candidate lines runs: the look every
    /// arrival on the line barrier makes before `line_step`.
    #[inline(always)]
    pub fn line_trial_running(&self) -> bool {
        self.line_trial.running()
    }

    /// Before this rank's arrival while the trial runs: moves its line
    /// barrier to the line its next barrier runs on (`LineTrial::step`),
    /// with its count there. `Ok(true)` when the trial just ended here.
    /// Nothing here can panic (MPI_Barrier's line path calls it).
    pub fn line_step(&self) -> Result<bool, Announcement> {
        let slot = match self.line_trial.step(self.line_pick())? {
            Step::Stay => return Ok(false),
            Step::Move(slot) => slot,
            Step::End { slot, times } => {
                if let Some((picked, first)) = times {
                    let _ = self.line_tried.set((self.line_trial.slots(), picked, first));
                }
                self.move_line(slot);
                return Ok(true);
            }
        };
        self.move_line(slot);
        Ok(false)
    }

    /// Moves this rank's line barrier to candidate line `to`, keeping its
    /// count on the line it leaves.
    fn move_line(&self, to: usize) {
        let (from, to) = (usize::from(self.line_slot()), to % LINE_SLOTS);
        if from == to {
            return;
        }
        self.line_trial.count(from).store(self.line_mine.load(Relaxed), Relaxed);
        self.line_mine.store(self.line_trial.count(to).load(Relaxed), Relaxed);
        self.line_slot.store(to as u8, Relaxed);
        self.line_wires_at.store(self.layout.line_at + to * self.layout.line_stride, Relaxed);
    }

    /// The candidate line in use and, on rank 0 after a trial, what it
    /// measured (candidates, ns per barrier on the line picked, on the
    /// first line).
    pub fn line_in_use(&self) -> (usize, Option<(usize, f64, f64)>) {
        (usize::from(self.line_slot()), self.line_tried.get().copied())
    }

    /// The candidate lines a trial still running tries.
    pub fn line_trial_slots(&self) -> Option<usize> {
        self.line_trial.running().then(|| self.line_trial.slots())
    }

    /// The word where rank 0 announces the candidate line picked.
    pub fn line_pick(&self) -> &AtomicU32 {
        self.header_word(LINE_PICK_AT)
    }

    /// This rank's own count on the line barrier (`core::line::arrive`).
    pub fn line_mine(&self) -> &AtomicU8 {
        &self.line_mine
    }

    /// The word the line barrier's sleepers sleep on and wakers ring.
    pub fn doorbell(&self) -> &AtomicU32 {
        // SAFETY: as in `wires`: inside the mapping, aligned, zero-initialised.
        unsafe { &self.slice::<Line<AtomicU32>>(self.layout.doorbell, 1)[0].0 }
    }

    /// The DMA-counter barrier's counters, one per rank.
    pub fn counters(&self) -> &[Line<AtomicI32>] {
        let l = &self.layout;
        // SAFETY: as in `wires`: inside the mapping, aligned, zero-initialised.
        unsafe { self.slice::<Line<AtomicI32>>(l.counters_at, l.ranks) }
    }
}

impl Drop for Segment {
    /// Lets the segment go: kept for a next communicator (`shm::kept`) if
    /// its device was sealed (every rank mapped it, no offer is out) and its
    /// communicator did not fail; else unmapped, and the creator's fd
    /// closed. A peer keeps its mapping only of a segment whose creator kept
    /// the fd. References handed out borrow `self`, so none outlive this.
    fn drop(&mut self) {
        let Some(map) = self.map.take() else { return };
        // Read before letting go: once the users word reads 0 the creator
        // may zero the memory for another communicator.
        let keep = self.shape.is_some() && !self.failed();
        let kept_by_creator = self.kept_word().load(Acquire) != 0;
        self.users().fetch_sub(1, Release);
        match (self.fd.take(), self.key) {
            (Some(fd), _) if self.fd_kept => {
                if keep {
                    self.kept.keep_created(Created { map, fd, ranks: self.layout.ranks });
                } else {
                    drop((map, fd));
                    self.kept.fd_closed();
                }
            }
            (_, Some(key)) if keep && kept_by_creator => self.kept.keep_mapped(key, map),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{counter, line, toggle};
    use crate::shm::line_pick::{PASSES, PER_BLOCK};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// One line barrier as the device runs it: the trial's step, the
    /// arrival on the line it names, the wait on the ticket's line.
    fn barrier(seg: &Segment, me: usize) -> bool {
        let ended = seg.line_step().unwrap();
        let slot = seg.line_slot();
        let count = line::arrive(seg.line_wires(), me, seg.line_mine());
        while !line::is_released(seg.line_candidate(usize::from(slot)), count) {
            std::thread::yield_now();
        }
        ended
    }

    /// A rank's line in use and rank 0's trial figures (`line_in_use`), its
    /// count there, and the barrier at which its trial ended.
    type Ended = ((usize, Option<(usize, f64, f64)>), u8, Option<usize>);

    /// `n` threads, each a rank with its own mapping of one segment, try
    /// `slots` candidate lines from their first barrier on (rank 0 timed by
    /// `clock`) and run `rounds` line barriers, checking that no thread
    /// leaves a barrier before every thread entered it. Each rank's
    /// `Ended`.
    fn run(n: usize, slots: usize, clock: fn() -> u64, rounds: usize) -> Vec<Ended> {
        let first = Segment::create(n, 1).unwrap();
        let offer = first.offer().unwrap();
        let mut segs = vec![first];
        segs.extend((1..n).map(|_| Segment::attach(&offer, n).unwrap()));
        let entered = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let hs: Vec<_> = segs
                .into_iter()
                .enumerate()
                .map(|(me, mut seg)| {
                    let entered = &entered;
                    s.spawn(move || {
                        seg.start_line_trial(me, slots, clock);
                        let mut ended = None;
                        for round in 0..rounds {
                            entered.fetch_add(1, SeqCst);
                            if barrier(&seg, me) {
                                ended = Some(round);
                            }
                            let seen = entered.load(SeqCst);
                            assert!(seen >= (round + 1) * n, "n={n} rank {me} left round {round} early ({seen})");
                        }
                        (seg.line_in_use(), seg.line_mine().load(SeqCst), ended)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    thread_local! {
        /// The fake clock's reads so far.
        static READS: Cell<usize> = const { Cell::new(0) };
    }

    /// A fake clock read at the start of each block and at the
    /// announcement, in the trial's order (block b ends at read b + 1; its
    /// line is b mod 16): blocks on line `fast` take 1 µs, the others 3
    /// µs, but the first pass's block on `fast` takes 100 µs (a preempted
    /// rank).
    fn clock_with_fastest(fast: usize) -> u64 {
        let k = READS.with(|r| {
            r.set(r.get() + 1);
            r.get() - 1
        });
        (0..k)
            .map(|b| match b % 16 {
                s if s == fast && b < 16 => 100_000,
                s if s == fast => 1_000,
                _ => 3_000,
            })
            .sum()
    }

    fn line_5_fastest() -> u64 {
        clock_with_fastest(5)
    }

    fn line_0_fastest() -> u64 {
        clock_with_fastest(0)
    }

    /// Every rank ends on the line rank 0 timed fastest, at the barrier
    /// after the announcement, with the count every rank has there (the
    /// first line's includes the first barrier, the announcement and the
    /// barriers after it); rank 0's times are per barrier, and its slow
    /// block counted for nothing. The barriers go on there.
    #[test]
    fn every_rank_ends_on_the_fastest_line() {
        let total = LineTrial::barriers(16) as usize;
        for (fast, clock) in [(5, line_5_fastest as fn() -> u64), (0, line_0_fastest)] {
            for (n, after) in [(2, 0), (3, 1), (5, 40)] {
                let out = run(n, 16, clock, total + 1 + after);
                let on_fast = (PASSES * PER_BLOCK) as usize + 1 + after + if fast == 0 { 2 } else { 0 };
                let want = on_fast as u8 & line::COUNT;
                for (r, ((slot, tried), count, ended)) in out.iter().enumerate() {
                    assert_eq!((*slot, *count, *ended), (fast, want, Some(total)), "n={n} rank {r}");
                    assert_eq!(tried.is_some(), r == 0, "n={n} rank {r}");
                }
                let (slots, picked, first) = out[0].0 .1.unwrap();
                let first_ns = if fast == 0 { 1_000.0 } else { 3_000.0 };
                assert_eq!((slots, picked, first), (16, 1_000.0 / PER_BLOCK as f64, first_ns / PER_BLOCK as f64));
            }
        }
    }

    /// With the real clock the ranks agree on whichever line it picks, and
    /// barriers before, through and after the trial never leave early,
    /// for several counts of ranks and candidates; a communicator that
    /// stops before the trial's end stays where it was, with no times.
    #[test]
    fn the_ranks_agree_and_no_barrier_leaves_early() {
        for (n, slots) in [(2, 2), (3, 16), (4, 7), (2, 16)] {
            let total = LineTrial::barriers(slots) as usize;
            let out = run(n, slots, crate::wait::now_ns, total + 300);
            let ((slot, _), count, _) = out[0];
            assert!(slot < slots);
            assert!(out.iter().all(|o| (o.0 .0, o.1, o.2) == (slot, count, Some(total))), "n={n}: {out:?}");
        }
        let out = run(3, 4, crate::wait::now_ns, 100);
        assert!(out.iter().all(|o| o.0 .1.is_none() && o.2.is_none()), "{out:?}");
    }

    #[test]
    fn layout_is_page_rounded_and_line_aligned() {
        let l = Layout::new(8);
        assert_eq!(l.len % 4096, 0);
        assert_eq!(l.places_at % 8, 0);
        assert!(l.places_at + 8 * 8 <= l.len);
        assert_eq!(l.asleep_at % 128, 0);
        assert_eq!(l.banks_at % 128, 0);
        assert_eq!(l.counters_at % 128, 0);
        assert_eq!((l.line_at % 128, l.doorbell % 128, l.own_at % 128), (0, 0, 0));
        assert_eq!(l.entered_at % 128, 0);
        assert!(
            l.line_at + 8 <= l.own_at && l.own_at + 8 * 128 <= l.entered_at && l.entered_at + 8 * 128 <= l.places_at
        );
        assert_eq!(Layout::new(200).own_at - Layout::new(200).line_at, LINE_SLOTS * 256);
        assert!(Layout::new(1000).len >= 128 * (4 * 1000 + 16 + 3));
    }

    /// A process's kept segments of its own, for one test.
    fn kept(created: usize, mapped: usize, fds: usize) -> &'static Kept {
        Box::leak(Box::new(Kept::new(created, mapped, fds)))
    }

    /// Seals `s` as the exchange's verdict does on every rank.
    fn seal(s: &mut Segment) {
        let n = s.layout.ranks;
        s.seal(toggle::Shape::new(n), crate::core::polled::Tree::new(n));
    }

    #[test]
    fn attach_sees_the_creators_memory_and_rejects_strangers() {
        let n = 3;
        // No fd kept after the exchange.
        let kept = kept(4, 4, 0);
        let mut a = Segment::create_in(kept, n, 42).unwrap();
        let offer = a.offer().unwrap();
        let b = Segment::attach_in(kept, &offer, n).unwrap();
        counter::arrive(a.counters(), 0);
        assert_eq!(b.counters()[0].load(std::sync::atomic::Ordering::SeqCst), 2);
        let shape = toggle::Shape::new(n);
        toggle::arrive(&shape, &b.wires(), 1);
        assert_eq!(a.wires().banks[0].load(std::sync::atomic::Ordering::SeqCst), 0b10);
        // Wrong token, wrong size: refused.
        assert!(Segment::attach_in(kept, &Offer { token: 7, ..offer }, n).is_err());
        assert!(Segment::attach_in(kept, &offer, n + 1).is_err());
        a.seal(shape.clone(), crate::core::polled::Tree::new(n));
        assert!(Segment::attach_in(kept, &offer, n).is_err(), "fd closed after seal");
        // b still works after the creator's fd is gone.
        counter::arrive(b.counters(), 1);
        assert_eq!(a.counters()[0].load(std::sync::atomic::Ordering::SeqCst), 1);
        // The failure word is shared too, and apart from everything else.
        assert!(!a.failed() && !b.failed());
        b.set_failed();
        assert!(a.failed());
        assert_eq!(a.revoked(), None);
        assert_eq!(a.counters()[0].load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A freed segment serves the next communicator of its size only once
    /// every rank that mapped it let it go, zeroed and stamped anew, at the
    /// same fd, and its peer finds its own mapping of it again.
    #[test]
    fn a_freed_segment_serves_the_next_communicator_once_every_rank_let_go() {
        use std::sync::atomic::Ordering::SeqCst;
        let (n, kept) = (2, kept(2, 2, 4));
        let mut a = Segment::create_in(kept, n, 10).unwrap();
        let offer = a.offer().unwrap();
        let mut b = Segment::attach_in(kept, &offer, n).unwrap();
        seal(&mut a);
        seal(&mut b);
        counter::arrive(a.counters(), 0);
        a.line_pick().store(3, SeqCst);
        let (a_at, b_at) = (a.base, b.base);
        drop(a);
        assert_eq!(kept.counts(), (1, 0, 1), "the creator keeps it, with its fd");
        // Its peer still maps it: the next communicator gets another.
        let c = Segment::create_in(kept, n, 11).unwrap();
        assert_ne!(c.base, a_at);
        assert_ne!(c.offer().unwrap().fd, offer.fd);
        drop(c);
        assert_eq!(kept.counts(), (1, 0, 1), "an unsealed segment is not kept");
        drop(b);
        assert_eq!(kept.counts(), (1, 1, 1));
        // Not for another size.
        let other = Segment::create_in(kept, n + 1, 12).unwrap();
        assert_ne!(other.base, a_at);
        drop(other);
        let d = Segment::create_in(kept, n, 13).unwrap();
        assert_eq!(d.base, a_at);
        assert_eq!(d.counters()[0].load(SeqCst), 0, "zeroed");
        assert_eq!((d.line_pick().load(SeqCst), d.token()), (0, 13));
        let od = d.offer().unwrap();
        assert_eq!((od.pid, od.fd, od.len), (offer.pid, offer.fd, offer.len));
        let e = Segment::attach_in(kept, &od, n).unwrap();
        assert_eq!(e.base, b_at, "the peer's own mapping, kept");
        assert_eq!(kept.counts(), (0, 0, 1));
        counter::arrive(e.counters(), 1);
        assert_eq!(d.counters()[0].load(SeqCst), -1, "shared memory again");
        // Both count as users.
        assert_eq!(d.users().load(SeqCst), 2);
        drop(e);
        assert_eq!(d.users().load(SeqCst), 1);
        // Dropped before its seal (an exchange abandoned), a reused
        // segment is not kept either, and its fd is closed.
        drop(d);
        assert_eq!(kept.counts(), (0, 0, 0));
    }

    /// A failed communicator's segment is never kept, on either side, and
    /// its fd is closed.
    #[test]
    fn a_failed_segment_is_not_kept() {
        let (n, kept) = (2, kept(2, 2, 4));
        let mut a = Segment::create_in(kept, n, 20).unwrap();
        let mut b = Segment::attach_in(kept, &a.offer().unwrap(), n).unwrap();
        seal(&mut a);
        seal(&mut b);
        assert_eq!(kept.counts(), (0, 0, 1));
        b.set_failed();
        drop((a, b));
        assert_eq!(kept.counts(), (0, 0, 0));
        // Marked after the creator kept it, by the last rank before it let
        // go: the next communicator does not get it, and its fd is closed.
        let mut a = Segment::create_in(kept, n, 21).unwrap();
        let offer = a.offer().unwrap();
        let mut b = Segment::attach_in(kept, &offer, n).unwrap();
        seal(&mut a);
        seal(&mut b);
        drop(a);
        assert_eq!(kept.counts(), (1, 0, 1));
        b.set_failed();
        drop(b);
        // Reused, it would keep its fd counted; a fresh one has none yet
        // (addresses and fd numbers may come back, so they tell nothing).
        let c = Segment::create_in(kept, n, 22).unwrap();
        assert!(!c.failed() && !c.fd_kept);
        assert_eq!(kept.counts(), (0, 0, 0));
    }

    /// A peer keeps its mapping only of a sealed segment whose creator kept
    /// the fd: another could never be offered again.
    #[test]
    fn a_peer_keeps_only_what_its_creator_kept() {
        let n = 2;
        for (kept, sealed) in [(kept(2, 2, 0), true), (kept(2, 2, 4), false)] {
            let mut a = Segment::create_in(kept, n, 50).unwrap();
            let mut b = Segment::attach_in(kept, &a.offer().unwrap(), n).unwrap();
            seal(&mut a);
            if sealed {
                seal(&mut b);
            }
            drop(b);
            assert_eq!(kept.counts().1, 0, "fds kept {}, peer sealed {sealed}", kept.limit_fds());
        }
    }

    /// A mapping kept under an offer's key that now names another segment
    /// (the creator's fd number came back for a new memfd) is not used:
    /// the peer maps the segment offered and lets the stale one go.
    #[test]
    fn a_stale_kept_mapping_is_not_taken_for_the_segment_offered() {
        let (n, kept) = (2, kept(2, 2, 4));
        let x = Segment::create_in(kept, n, 30).unwrap();
        let y = Segment::create_in(kept, n, 31).unwrap();
        let file = File::from(y.fd.as_ref().unwrap().try_clone().unwrap());
        let stale = map(&file, y.layout.len).unwrap();
        let ox = x.offer().unwrap();
        kept.keep_mapped((ox.pid, ox.fd, ox.len), stale);
        // The stale mapping reads y's token, 31 (its range may come back
        // for the new mapping, so the address tells nothing).
        let b = Segment::attach_in(kept, &ox, n).unwrap();
        assert_eq!(b.token(), 30);
        assert_eq!(kept.counts().1, 0, "the stale mapping was let go");
    }

    /// At most so many segments and mappings kept: the oldest go.
    #[test]
    fn kept_segments_are_bounded() {
        let (n, kept) = (2, kept(2, 1, 3));
        let mut segs: Vec<Segment> = (0..4).map(|t| Segment::create_in(kept, n, 40 + t).unwrap()).collect();
        let mut peers: Vec<Segment> =
            segs.iter().map(|s| Segment::attach_in(kept, &s.offer().unwrap(), n).unwrap()).collect();
        segs.iter_mut().chain(peers.iter_mut()).for_each(seal);
        assert_eq!(kept.counts(), (0, 0, 3), "3 fds kept, the 4th closed at its seal");
        drop(peers);
        assert_eq!(kept.counts(), (0, 1, 3));
        drop(segs);
        assert_eq!(kept.counts(), (2, 1, 2), "the oldest of 3 went, with its fd");
    }

    #[test]
    fn a_revocation_carries_its_error_and_the_first_mark_stays() {
        let a = Segment::create(2, 1).unwrap();
        assert_eq!(a.revoked(), None);
        a.set_revoked(75);
        a.set_failed();
        a.set_revoked(77);
        assert!(a.failed());
        assert_eq!(a.revoked(), Some(75));
        let b = Segment::create(2, 2).unwrap();
        b.set_failed();
        b.set_revoked(75);
        assert_eq!(b.revoked(), None);
    }
}
