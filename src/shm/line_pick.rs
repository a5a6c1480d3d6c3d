//! Picking the line barrier's cache line by measuring it.
//!
//! A cache line passed between two cores costs more or less depending on
//! its address: on a mesh CPU each line has a home agent (an L3 slice and
//! its snoop filter) picked by a hash of the physical address, and every
//! transfer goes through it; elsewhere the directory or memory channel
//! plays that part. On this project's 2-core Intel VM a 2-thread line
//! barrier took 62–80 ns on some lines of a page and 82–98 ns on others,
//! line for line the same from sweep to sweep (docs/benchmarks.md, "Where
//! the line lies"). A software barrier on one line gets whichever the
//! allocator gave it; here the ranks try `slots` candidate lines of the
//! segment and keep the fastest.
//!
//! The trial is the communicator's own first barriers, whatever kind the
//! program calls: it adds none of its own, so a communicator's setup costs
//! no barriers (a trial of its own, run in the first barrier, was most of
//! that setup: docs/benchmarks.md, "The line trial in the program's own
//! barriers"), and the barriers timed are the ones the line picked will
//! serve, polled as they poll. Before each arrival a rank steps the trial
//! (`LineTrial::step`, called from `Segment::line_step`): the first barrier
//! on the first line, then `PASSES` rounds of a block of `PER_BLOCK` on
//! each candidate, then an announcement on the first line; each rank moves
//! to a block's line at its first barrier, with its count there. Rank 0
//! times each block from its first arrival to the next block's and keeps
//! each line's fastest (blocks of 64 read what the barrier then costs; 16
//! did not: docs/benchmarks.md, "The line trial polls as the line path
//! does"). Before it arrives at the announcement it writes its pick into
//! the segment (`Segment::line_pick`), which every rank reads at its next
//! arrival, once that barrier released it (a wire's release store and the
//! waiters' acquiring looks carry it). Every rank ran the same barriers on
//! each line, so its count on the line picked is every rank's.
//!
//! A rank never arrives before its previous barrier released it, so it can
//! move between lines at an arrival: nobody waits on the line it leaves
//! for it any more, and a barrier's ticket names its line
//! (`barrier::device::Ticket`). Only where ranks keep their cores
//! (`Comm::line_trial`): where they share them the scheduler, not the
//! line, sets a barrier's time. A program that computes between its
//! barriers times its computing too, and the line picked is then as good
//! as any: no worse than no trial.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::sync::AtomicU8;

/// Barriers timed together on one candidate line. Blocks of 16 read 76-116
/// ns a barrier where the barrier then ran at 60-74, and the line they
/// picked left as many communicators slow as no trial; blocks of 64 read
/// 56-63, close to what the barrier then runs at (docs/benchmarks.md, "The
/// line trial polls as the line path does").
pub const PER_BLOCK: u32 = 64;
/// Rounds over the candidates; each line's fastest block counts.
pub const PASSES: u32 = 3;

/// Candidate lines for the line barrier's wires, in every segment
/// (`shm::segment`); a trial tries up to all of them.
pub const LINE_SLOTS: usize = 16;

/// `LineTrial::step` of a rank with no trial running.
const NONE: u32 = u32::MAX;

/// How many candidate lines a communicator's ranks try (rank 0's count
/// wins; 1 or less: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trial {
    /// Candidate lines to try (2 to `LINE_SLOTS`; fewer: no trial).
    pub lines: usize,
}

impl Trial {
    /// No trial: the first line serves.
    pub const NONE: Trial = Trial { lines: 1 };
}

/// Where a rank's next barrier goes (`LineTrial::step`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// On the line it is on.
    Stay,
    /// On candidate line `0`, from there on until the next move.
    Move(usize),
    /// The trial is over: on the line picked, for good; rank 0 has the ns
    /// per barrier of the fastest block there and on the first line.
    End { slot: usize, times: Option<(f64, f64)> },
}

/// Why the trial failed: rank 0's announcement (read as this) named no
/// candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement(pub u32);

/// One rank's trial, in its process's memory. Stepped only by the thread
/// that arrives (one barrier at a time on a communicator); atomics only so
/// that the segment holding it can be shared.
pub struct LineTrial {
    me: usize,
    slots: u32,
    /// The barrier of the trial this rank enters next; `NONE`: none runs.
    step: AtomicU32,
    /// Our count on each candidate line while we are on another.
    counts: [AtomicU8; LINE_SLOTS],
    /// Rank 0's clock, in ns.
    clock: fn() -> u64,
    /// Rank 0: when the block under way began.
    last: AtomicU64,
    /// Rank 0: each line's fastest block, in ns.
    best: [AtomicU64; LINE_SLOTS],
}

impl LineTrial {
    /// No trial.
    pub fn none() -> LineTrial {
        LineTrial {
            me: 0,
            slots: 1,
            step: AtomicU32::new(NONE),
            counts: Default::default(),
            clock: || 0,
            last: AtomicU64::new(0),
            best: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }

    /// Rank `me`'s trial of `slots` candidate lines (2 to `LINE_SLOTS`),
    /// timed by `clock` (ns; read on rank 0 only), from its next barrier.
    pub fn new(me: usize, slots: usize, clock: fn() -> u64) -> LineTrial {
        assert!((2..=LINE_SLOTS).contains(&slots), "{slots} candidate lines");
        LineTrial { me, slots: slots as u32, step: AtomicU32::new(0), clock, ..LineTrial::none() }
    }

    /// Whether a trial runs: the one look an arrival makes once it is over.
    #[inline(always)]
    pub fn running(&self) -> bool {
        self.step.load(Relaxed) != NONE
    }

    /// The candidate lines tried.
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// Barriers in the trial: the first, the blocks, the announcement.
    pub fn barriers(slots: usize) -> u32 {
        2 + PASSES * slots as u32 * PER_BLOCK
    }

    /// Our count on candidate line `slot` while we are on another.
    pub fn count(&self, slot: usize) -> &AtomicU8 {
        &self.counts[slot % LINE_SLOTS]
    }

    /// Rank 0: the line with the fastest block (the first on a tie, or
    /// when nothing was timed).
    fn fastest(&self) -> usize {
        (0..self.slots as usize).min_by_key(|&s| (self.best[s].load(Relaxed), s)).unwrap_or(0)
    }

    /// Before this rank's arrival at its next barrier: where that barrier
    /// goes (`Stay` once no trial runs). `pick` is the segment's announcement word.
    /// Nothing here can panic (it runs on MPI_Barrier's line path, outside
    /// the panic containment).
    pub fn step(&self, pick: &AtomicU32) -> Result<Step, Announcement> {
        let s = self.step.load(Relaxed);
        let total = Self::barriers(self.slots as usize);
        if s == NONE {
            return Ok(Step::Stay);
        }
        if s >= total {
            // The announcement released us: the line picked, for good.
            self.step.store(NONE, Relaxed);
            let p = pick.load(Relaxed);
            if p == 0 || p > self.slots {
                return Err(Announcement(p));
            }
            let slot = p as usize - 1;
            let times = (self.me == 0).then(|| {
                let per = |s: usize| self.best[s].load(Relaxed) as f64 / f64::from(PER_BLOCK);
                (per(slot), per(0))
            });
            return Ok(Step::End { slot, times });
        }
        self.step.store(s + 1, Relaxed);
        // A block starts at barrier 1 + PER_BLOCK b; the announcement
        // follows the last one.
        let starts = s >= 1 && (s - 1).is_multiple_of(PER_BLOCK);
        if !starts {
            return Ok(Step::Stay);
        }
        let block = (s - 1) / PER_BLOCK;
        if self.me == 0 {
            let now = (self.clock)();
            if block > 0 {
                let b = &self.best[((block - 1) % self.slots) as usize];
                b.store(b.load(Relaxed).min(now.saturating_sub(self.last.load(Relaxed))), Relaxed);
            }
            self.last.store(now, Relaxed);
            if s + 1 == total {
                // Before our arrival's release store, which carries it.
                pick.store(self.fastest() as u32 + 1, Relaxed);
            }
        }
        Ok(Step::Move(if s + 1 == total { 0 } else { (block % self.slots) as usize }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    /// The lines a rank's barriers run on, barrier by barrier: the first
    /// and the announcement on the first line, blocks of `PER_BLOCK` on each
    /// candidate in turn, `PASSES` times, then the line picked; a rank
    /// moves only at a block's first barrier. Rank 0 writes its pick
    /// (here the first line: every block took no time) before it arrives
    /// at the announcement.
    #[test]
    fn the_trial_moves_at_each_block_and_ends_on_the_pick() {
        let slots = 3;
        let total = LineTrial::barriers(slots);
        for me in [0, 1] {
            let t = LineTrial::new(me, slots, || 7);
            let pick = AtomicU32::new(if me == 0 { 0 } else { 3 });
            let mut on = 0;
            for s in 0..total {
                assert!(t.running());
                let want = match s {
                    0 => Step::Stay,
                    s if s + 1 == total => Step::Move(0),
                    s if (s - 1) % PER_BLOCK == 0 => Step::Move((((s - 1) / PER_BLOCK) % slots as u32) as usize),
                    _ => Step::Stay,
                };
                assert_eq!(t.step(&pick), Ok(want), "rank {me} barrier {s}");
                if let Step::Move(l) = want {
                    on = l;
                }
                let block = s.checked_sub(1).map(|b| b / PER_BLOCK);
                if s > 0 && s + 1 < total {
                    assert_eq!(on, (block.unwrap() % slots as u32) as usize, "barrier {s}");
                }
            }
            assert_eq!(pick.load(SeqCst), if me == 0 { 1 } else { 3 });
            let times = (me == 0).then_some((0.0, 0.0));
            let slot = if me == 0 { 0 } else { 2 };
            assert_eq!(t.step(&pick), Ok(Step::End { slot, times }));
            assert!(!t.running());
        }
    }

    /// A peer that reads no pick, or one past the candidates, fails rather
    /// than run on another line than rank 0; the trial is over either way.
    #[test]
    fn a_peer_refuses_an_announcement_that_names_no_candidate() {
        let total = LineTrial::barriers(4);
        for bad in [0, 5, u32::MAX] {
            let t = LineTrial::new(1, 4, || 0);
            let pick = AtomicU32::new(bad);
            for _ in 0..total {
                t.step(&pick).unwrap();
            }
            assert_eq!(t.step(&pick), Err(Announcement(bad)), "{bad}");
            assert!(!t.running());
            assert_eq!(t.step(&pick), Ok(Step::Stay), "over");
        }
        assert!(!LineTrial::none().running());
    }
}
