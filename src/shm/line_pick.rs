//! Picking the line barrier's cache line by measuring it.
//!
//! A cache line passed between two cores costs more or less depending on
//! its address: on a mesh CPU each line has a home agent (an L3 slice and
//! its snoop filter) picked by a hash of the physical address, and every
//! transfer goes through it; elsewhere the directory or memory channel
//! plays that part. On this project's 2-core Intel VM a 2-rank line barrier
//! took 57–65 ns on some lines and 95–110 ns on others of the same page,
//! line for line the same from run to run (docs/benchmarks.md, "Where the
//! line lies"). A software barrier on one line gets whichever the
//! allocator gave it; here the ranks try `slots` candidate lines of the
//! segment at their first barrier and keep the fastest.
//!
//! The trial is line barriers, so it is itself a barrier: warm-up on the
//! first line, `PASSES` rounds of `PER_BLOCK` barriers on each candidate,
//! then an announcement on the first line. Rank 0 times each block and
//! keeps each line's fastest; before it arrives at the announcement it
//! writes its pick into the segment (`Segment::line_pick`), which every
//! rank reads once that barrier releases it (a wire's release store and
//! the waiters' acquiring looks carry it). Every rank ran the same barriers
//! on each line, so its count on the line picked is every rank's.
//!
//! Non-blocking, as the device exchange it ends (`exchange::device`):
//! `poll` polls a barrier a bounded number of times and returns, so a first
//! MPI_Ibarrier runs the trial from progress (its times then measure
//! nothing useful, and the pick is as good as the first line).

use std::sync::atomic::Ordering::Relaxed;

use crate::core::line::{self, Count};
use crate::shm::segment::{Segment, LINE_SLOTS};
use crate::sync::AtomicU8;

/// Barriers timed together on one candidate line.
pub const PER_BLOCK: usize = 16;
/// Rounds over the candidates; each line's fastest block counts.
pub const PASSES: usize = 3;
/// Polls of a pending barrier before `poll` returns to its caller.
const SPINS: u32 = 1024;

/// The trial's outcome on one rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Picked {
    /// The candidate line the barrier keeps.
    pub slot: usize,
    /// This rank's count on it (every rank's).
    pub count: u8,
    /// Rank 0: ns per barrier of the fastest block on the line picked and
    /// on the first line.
    pub times: Option<(f64, f64)>,
}

/// The device failed during the trial (a rank marked it: `Segment::failed`),
/// or rank 0's announcement did not name a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failed;

/// One rank's part in the trial.
pub struct LinePick {
    me: usize,
    slots: usize,
    /// Barriers of the trial this rank has left.
    step: usize,
    /// Our count on each candidate line.
    counts: [AtomicU8; LINE_SLOTS],
    /// The barrier we arrived at and wait for: (line, count).
    pending: Option<(usize, Count)>,
    /// Rank 0's clock, in ns.
    clock: fn() -> u64,
    /// When the last block ended.
    last: u64,
    /// Rank 0: each line's fastest block, in ns.
    best: [u64; LINE_SLOTS],
}

impl LinePick {
    /// Rank `me`'s trial of `slots` candidate lines (2 to `LINE_SLOTS`),
    /// timed by `clock` (ns; read on rank 0 only).
    pub fn new(me: usize, slots: usize, clock: fn() -> u64) -> LinePick {
        assert!((2..=LINE_SLOTS).contains(&slots), "{slots} candidate lines");
        LinePick {
            me,
            slots,
            step: 0,
            counts: Default::default(),
            pending: None,
            clock,
            last: 0,
            best: [u64::MAX; LINE_SLOTS],
        }
    }

    /// The candidate lines tried.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Barriers in the trial: warm-up, the blocks, the announcement.
    pub fn barriers(slots: usize) -> usize {
        2 + PASSES * slots * PER_BLOCK
    }

    fn total(&self) -> usize {
        Self::barriers(self.slots)
    }

    /// The candidate line of barrier `step`.
    fn slot_of(&self, step: usize) -> usize {
        if step == 0 || step + 1 == self.total() {
            0
        } else {
            ((step - 1) / PER_BLOCK) % self.slots
        }
    }

    /// Rank 0: the line with the fastest block (the first on a tie, or
    /// when nothing was timed).
    fn fastest(&self) -> usize {
        (0..self.slots).min_by_key(|&s| (self.best[s], s)).unwrap_or(0)
    }

    /// Advances the trial without blocking for long: `Ok(None)` while a
    /// barrier of it is pending, `Ok(Some)` at its end, `Err` if the device
    /// failed meanwhile.
    pub fn poll(&mut self, seg: &Segment) -> Result<Option<Picked>, Failed> {
        loop {
            let (slot, count) = match self.pending {
                Some(p) => p,
                None => {
                    let slot = self.slot_of(self.step);
                    if self.me == 0 && self.step + 1 == self.total() {
                        // Before our arrival's release store, which carries it.
                        seg.line_pick().store(self.fastest() as u32 + 1, Relaxed);
                    }
                    let c = line::arrive(seg.line_candidate(slot), self.me, &self.counts[slot]);
                    self.pending = Some((slot, c));
                    (slot, c)
                }
            };
            let wires = seg.line_candidate(slot);
            let mut spins = 0;
            while !line::is_released(wires, count) {
                if seg.failed() {
                    return Err(Failed);
                }
                spins += 1;
                if spins == SPINS {
                    return Ok(None);
                }
                std::hint::spin_loop();
            }
            self.pending = None;
            if self.me == 0 && self.step.is_multiple_of(PER_BLOCK) && self.step + 1 < self.total() {
                let now = (self.clock)();
                if self.step > 0 {
                    let s = (self.step / PER_BLOCK - 1) % self.slots;
                    self.best[s] = self.best[s].min(now.saturating_sub(self.last));
                }
                self.last = now;
            }
            self.step += 1;
            if self.step == self.total() {
                return self.end(seg).map(Some);
            }
        }
    }

    /// After the announcement: the line picked, our count on it.
    fn end(&self, seg: &Segment) -> Result<Picked, Failed> {
        let (slot, times) = if self.me == 0 {
            let s = self.fastest();
            let per = |t: u64| (t != u64::MAX).then(|| t as f64 / PER_BLOCK as f64);
            (s, per(self.best[s]).zip(per(self.best[0])))
        } else {
            match seg.line_pick().load(Relaxed) as usize {
                p if (1..=self.slots).contains(&p) => (p - 1, None),
                _ => return Err(Failed),
            }
        };
        Ok(Picked { slot, count: self.counts[slot].load(Relaxed), times })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Runs the trial of `slots` lines among `n` threads on one segment,
    /// each polling to the end; rank 0 timed by `clock`. Every thread's
    /// outcome.
    fn trial(n: usize, slots: usize, clock: fn() -> u64) -> (Arc<Segment>, Vec<Picked>) {
        let seg = Arc::new(Segment::create(n, 1).unwrap());
        let out = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|me| {
                    let seg = Arc::clone(&seg);
                    s.spawn(move || {
                        let mut p = LinePick::new(me, slots, clock);
                        loop {
                            if let Some(done) = p.poll(&seg).unwrap() {
                                return done;
                            }
                            std::thread::yield_now();
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        (seg, out)
    }

    thread_local! {
        /// The fake clock's reads so far.
        static READS: Cell<usize> = const { Cell::new(0) };
    }

    /// A clock under which the blocks on line 5 take 1 µs and the others
    /// 3 µs, except one block of line 5 in the first pass (a preempted
    /// rank) that takes 100 µs: read at the end of the warm-up and of each
    /// block, in the trial's order.
    fn line_5_fastest() -> u64 {
        let k = READS.with(|r| {
            r.set(r.get() + 1);
            r.get() - 1
        });
        // Block b ends at read b + 1; its line is b mod 16.
        (0..k)
            .map(|b| {
                if b == 5 {
                    100_000
                } else if b % 16 == 5 {
                    1_000
                } else {
                    3_000
                }
            })
            .sum()
    }

    /// Every rank keeps the line rank 0 timed fastest, at the count every
    /// rank has there, and rank 0's times are per barrier; its slow block
    /// counted for nothing.
    #[test]
    fn every_rank_keeps_the_fastest_line() {
        for n in [2, 3, 5] {
            let (seg, out) = trial(n, 16, line_5_fastest);
            let want = (PASSES * PER_BLOCK) as u8;
            for (r, p) in out.iter().enumerate() {
                assert_eq!((p.slot, p.count), (5, want), "n={n} rank {r}");
                assert_eq!(p.times.is_some(), r == 0, "n={n} rank {r}");
            }
            let (fast, first) = out[0].times.unwrap();
            assert_eq!((fast, first), (1_000.0 / 16.0, 3_000.0 / 16.0));
            // Every wire of the line picked holds that count.
            let w = seg.line_candidate(5);
            assert!(w.iter().all(|w| w.load(SeqCst) == want), "n={n}");
        }
    }

    /// With the real clock the ranks agree on whichever line it picks, and
    /// the line barrier then runs on it from every rank's count: no rank
    /// leaves a barrier before every rank entered it.
    #[test]
    fn the_ranks_agree_and_barriers_go_on_on_the_line_picked() {
        const ROUNDS: usize = 300;
        for (n, slots) in [(2, 2), (3, 16), (4, 7)] {
            let (seg, out) = trial(n, slots, crate::wait::now_ns);
            let p0 = out[0];
            assert!(p0.slot < slots);
            assert!(out.iter().all(|p| (p.slot, p.count) == (p0.slot, p0.count)), "n={n}: {out:?}");
            let entered = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for me in 0..n {
                    let (seg, entered) = (&seg, &entered);
                    s.spawn(move || {
                        let wires = seg.line_candidate(p0.slot);
                        let mine = AtomicU8::new(p0.count);
                        for round in 0..ROUNDS {
                            entered.fetch_add(1, SeqCst);
                            let c = line::arrive(wires, me, &mine);
                            while !line::is_released(wires, c) {
                                std::thread::yield_now();
                            }
                            assert!(
                                entered.load(SeqCst) >= (round + 1) * n,
                                "n={n} rank {me} left round {round} early"
                            );
                        }
                    });
                }
            });
        }
    }

    /// A device marked failed ends the trial with an error on a rank whose
    /// peers never come.
    #[test]
    fn a_failed_device_ends_the_trial() {
        let seg = Segment::create(2, 1).unwrap();
        let mut p = LinePick::new(1, 4, crate::wait::now_ns);
        assert_eq!(p.poll(&seg), Ok(None), "rank 0 never arrives");
        seg.set_failed();
        assert_eq!(p.poll(&seg), Err(Failed));
    }

    /// A peer that reads no pick, or one past the candidates, fails rather
    /// than run on another line than rank 0.
    #[test]
    fn a_peer_refuses_an_announcement_that_names_no_candidate() {
        let seg = Segment::create(2, 1).unwrap();
        let p = LinePick::new(1, 4, crate::wait::now_ns);
        for bad in [0, 5, u32::MAX] {
            seg.line_pick().store(bad, SeqCst);
            assert_eq!(p.end(&seg), Err(Failed), "{bad}");
        }
        seg.line_pick().store(4, SeqCst);
        assert_eq!(p.end(&seg).map(|p| p.slot), Ok(3));
    }
}
