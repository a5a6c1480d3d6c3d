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
//! segment at their first blocking barrier and keep the fastest.
//!
//! The trial is line barriers, so it is itself a barrier: warm-up on the
//! first line, `PASSES` rounds of `PER_BLOCK` barriers on each candidate,
//! then an announcement on the first line. It polls as the barrier it
//! picks for will (`Trial::pauses`), in blocks long enough to read what
//! that barrier then costs: with blocks of 16 and a look after each PAUSE,
//! 10% of 2-rank communicators ran at 1.2x or more their launch's fastest
//! one, as many as with no trial; with blocks of 64 polled as the line
//! path polls, 5% (docs/benchmarks.md, "The line trial polls as the line
//! path does"). Rank 0 times each block and
//! keeps each line's fastest; before it arrives at the announcement it
//! writes its pick into the segment (`Segment::line_pick`), which every
//! rank reads once that barrier releases it (a wire's release store and
//! the waiters' acquiring looks carry it). Every rank ran the same barriers
//! on each line, so its count on the line picked is every rank's.
//!
//! Non-blocking, as the device exchange it ends (`exchange::device`):
//! `poll` polls a barrier a bounded number of times and returns to its
//! caller's wait loop. Rank 0 asks for a trial only in a blocking
//! MPI_Barrier (`Comm::line_trial`): from progress, in a first
//! MPI_Ibarrier or MPI_Start, each of its barriers would wait for every
//! rank's next MPI call, and its times would measure those.

use std::sync::atomic::Ordering::Relaxed;

use crate::core::line::{self, Count};
use crate::shm::segment::{Segment, LINE_SLOTS};
use crate::sync::AtomicU8;

/// Barriers timed together on one candidate line. Blocks of 16 read 76-116
/// ns a barrier where the barrier then ran at 60-74, and the line they
/// picked left as many communicators slow as no trial; blocks of 64 read
/// 56-63, close to what the barrier then runs at. Not the first barriers alone: 8 untimed before 16
/// timed picked worse still (docs/benchmarks.md, "The line trial polls as
/// the line path does").
pub const PER_BLOCK: usize = 64;
/// Rounds over the candidates; each line's fastest block counts.
pub const PASSES: usize = 3;
/// PAUSEs a pending barrier is polled with before `poll` returns to its
/// caller (`looks_per_poll`), so that its caller's wait loop gets its turn
/// as often whatever the PAUSEs per look.
const SPINS: u32 = 1024;

/// Looks at a pending barrier, `pauses` PAUSEs after each, before `poll`
/// returns: `SPINS` PAUSEs' worth, at least one look.
pub fn looks_per_poll(pauses: u32) -> u32 {
    SPINS.div_ceil(pauses.max(1))
}

/// What a rank's trial is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trial {
    /// Candidate lines to try (2 to `LINE_SLOTS`; fewer: no trial).
    pub lines: usize,
    /// PAUSEs after each look at a pending barrier (at least 1), as the
    /// barrier on the line picked will make (`pause::line_path`).
    pub pauses: u32,
}

impl Trial {
    /// No trial: the first line serves.
    pub const NONE: Trial = Trial { lines: 1, pauses: 1 };
}

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

/// Why the trial failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// A rank marked the device failed (`Segment::failed`).
    Device,
    /// Rank 0's announcement (read as this) named no candidate.
    Announcement(u32),
}

/// One rank's part in the trial.
pub struct LinePick {
    me: usize,
    slots: usize,
    /// PAUSEs after each look (`Trial::pauses`).
    pauses: u32,
    /// Looks at a pending barrier per `poll` (`looks_per_poll`).
    looks: u32,
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
    /// `pauses` PAUSEs after each look (at least 1), timed by `clock` (ns;
    /// read on rank 0 only).
    pub fn new(me: usize, slots: usize, pauses: u32, clock: fn() -> u64) -> LinePick {
        assert!((2..=LINE_SLOTS).contains(&slots), "{slots} candidate lines");
        LinePick {
            me,
            slots,
            pauses: pauses.max(1),
            looks: looks_per_poll(pauses),
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

    /// PAUSEs after each look.
    pub fn pauses(&self) -> u32 {
        self.pauses
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
            let mut looks: u32 = 0;
            while !line::is_released(wires, count) {
                if seg.failed() {
                    return Err(Failed::Device);
                }
                looks += 1;
                if looks >= self.looks {
                    return Ok(None);
                }
                for _ in 0..self.pauses {
                    std::hint::spin_loop();
                }
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
            match seg.line_pick().load(Relaxed) {
                p if (1..=self.slots).contains(&(p as usize)) => (p as usize - 1, None),
                p => return Err(Failed::Announcement(p)),
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
    /// rank r making `pauses[r % len]` PAUSEs after each look, each polling to the end (rank 0
    /// timed by `clock`), then, in the same
    /// threads and at once, `rounds` line barriers on the line each picked
    /// from its count there, checking that no thread leaves a barrier
    /// before every thread entered it (a fast thread is on the line picked
    /// while a slow one may still wait for the announcement). Every
    /// thread's outcome, and the segment.
    fn trial_then(
        n: usize,
        slots: usize,
        pauses: &[u32],
        clock: fn() -> u64,
        rounds: usize,
    ) -> (Arc<Segment>, Vec<Picked>) {
        let seg = Arc::new(Segment::create(n, 1).unwrap());
        let entered = AtomicUsize::new(0);
        let out = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|me| {
                    let (seg, entered) = (Arc::clone(&seg), &entered);
                    s.spawn(move || {
                        let mut p = LinePick::new(me, slots, pauses[me % pauses.len()], clock);
                        let done = loop {
                            if let Some(done) = p.poll(&seg).unwrap() {
                                break done;
                            }
                            std::thread::yield_now();
                        };
                        let wires = seg.line_candidate(done.slot);
                        let mine = AtomicU8::new(done.count);
                        for round in 0..rounds {
                            entered.fetch_add(1, SeqCst);
                            let c = line::arrive(wires, me, &mine);
                            while !line::is_released(wires, c) {
                                std::thread::yield_now();
                            }
                            let seen = entered.load(SeqCst);
                            assert!(seen >= (round + 1) * n, "n={n} rank {me} left round {round} early ({seen})");
                        }
                        done
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

    /// A fake clock read at the end of the warm-up and of each block, in
    /// the trial's order (block b ends at read b + 1; its line is b mod
    /// 16): blocks on line `fast` take 1 µs, the others 3 µs, but the
    /// first pass's block on `fast` takes 100 µs (a preempted rank).
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

    /// Every rank keeps the line rank 0 timed fastest, at the count every
    /// rank has there (the first line's includes the warm-up and the
    /// announcement), and barriers go on there; rank 0's times are per
    /// barrier, and its slow block counted for nothing.
    #[test]
    fn every_rank_keeps_the_fastest_line() {
        for (fast, clock) in [(5, line_5_fastest as fn() -> u64), (0, line_0_fastest)] {
            for n in [2, 3, 5] {
                let (seg, out) = trial_then(n, 16, &[1], clock, 0);
                let want = (PASSES * PER_BLOCK + if fast == 0 { 2 } else { 0 }) as u8 & line::COUNT;
                for (r, p) in out.iter().enumerate() {
                    assert_eq!((p.slot, p.count), (fast, want), "n={n} rank {r}");
                    assert_eq!(p.times.is_some(), r == 0, "n={n} rank {r}");
                }
                let (picked, first) = out[0].times.unwrap();
                let first_ns = if fast == 0 { 1_000.0 } else { 3_000.0 };
                assert_eq!((picked, first), (1_000.0 / PER_BLOCK as f64, first_ns / PER_BLOCK as f64));
                // Every wire of the line picked holds that count.
                let w = seg.line_candidate(fast);
                assert!(w.iter().all(|w| w.load(SeqCst) == want), "n={n}");
            }
        }
    }

    /// With the real clock the ranks agree on whichever line it picks, and
    /// the line barrier goes on on it from every rank's count at once,
    /// whatever PAUSEs each rank makes after a look (ranks time their own,
    /// and may differ).
    #[test]
    fn the_ranks_agree_and_barriers_go_on_on_the_line_picked() {
        let cases: [(usize, usize, &[u32]); 6] =
            [(2, 2, &[1]), (3, 16, &[3]), (4, 7, &[0]), (2, 16, &[64]), (2, 16, &[1, 64]), (3, 5, &[64, 0, 3])];
        for (n, slots, pauses) in cases {
            let (_, out) = trial_then(n, slots, pauses, crate::wait::now_ns, 300);
            let p0 = out[0];
            assert!(p0.slot < slots);
            assert!(out.iter().all(|p| (p.slot, p.count) == (p0.slot, p0.count)), "n={n}: {out:?}");
        }
        // And on a line picked by a clock that names one.
        for (n, clock) in [(3, line_5_fastest as fn() -> u64), (2, line_0_fastest)] {
            let (_, out) = trial_then(n, 16, &[3], clock, 300);
            assert!(out.iter().all(|p| p.slot == out[0].slot), "n={n}: {out:?}");
        }
    }

    /// A pending barrier is polled for `SPINS` PAUSEs, whatever the PAUSEs
    /// per look, before `poll` returns; a rank whose peers have not come
    /// returns with the barrier still pending, and arrives only once.
    #[test]
    fn a_poll_makes_as_many_pauses_whatever_the_pauses_per_look() {
        for (pauses, looks) in [(0, 1024), (1, 1024), (3, 342), (64, 16), (1000, 2), (5000, 1)] {
            assert_eq!(looks_per_poll(pauses), looks, "{pauses}");
            let p = LinePick::new(1, 4, pauses, crate::wait::now_ns);
            assert_eq!((p.pauses(), p.looks), (pauses.max(1), looks), "{pauses}");
        }
        let seg = Segment::create(2, 1).unwrap();
        let mut p = LinePick::new(1, 4, 64, crate::wait::now_ns);
        for _ in 0..3 {
            assert_eq!(p.poll(&seg), Ok(None), "rank 0 never arrives");
        }
        assert_eq!(p.pending.map(|(slot, _)| slot), Some(0), "the warm-up, on the first line");
        assert_eq!(p.counts[0].load(SeqCst), 1, "one arrival, polled three times");
    }

    /// A device marked failed ends the trial with an error on a rank whose
    /// peers never come.
    #[test]
    fn a_failed_device_ends_the_trial() {
        let seg = Segment::create(2, 1).unwrap();
        let mut p = LinePick::new(1, 4, 1, crate::wait::now_ns);
        assert_eq!(p.poll(&seg), Ok(None), "rank 0 never arrives");
        seg.set_failed();
        assert_eq!(p.poll(&seg), Err(Failed::Device));
    }

    /// A peer that reads no pick, or one past the candidates, fails rather
    /// than run on another line than rank 0.
    #[test]
    fn a_peer_refuses_an_announcement_that_names_no_candidate() {
        let seg = Segment::create(2, 1).unwrap();
        let p = LinePick::new(1, 4, 1, crate::wait::now_ns);
        for bad in [0, 5, u32::MAX] {
            seg.line_pick().store(bad, SeqCst);
            assert_eq!(p.end(&seg), Err(Failed::Announcement(bad)), "{bad}");
        }
        seg.line_pick().store(4, SeqCst);
        assert_eq!(p.end(&seg).map(|p| p.slot), Ok(3));
    }
}
