//! The toggle-wire barrier with the FSM in every rank: all output wires
//! share one cache line, and each rank reads them all.
//!
//! TUC's hardware computes "all outputs agree" once, in a central FSM that
//! then flips every input. In software that FSM costs a line of its own:
//! the rank that completes the bank must write the input word, and every
//! waiter must fetch it, so the release takes a second line transfer after
//! the last arrival (`toggle`). Here the wires are bytes of one line that
//! every rank polls: the last arrival's plain store is the release, and the
//! line a waiter fetches to see it carries every other wire too. With two
//! ranks that is one line passed back and forth (about 0.02 µs a barrier
//! on this machine's cores, against 0.05 µs for the counter's two lines
//! and locked adds; `docs/benchmarks.md`).
//!
//! A wire here holds a count, not one bit: without the central FSM a fast
//! rank that saw all wires agree may leave and toggle again before a slow
//! one has looked, and a bit would then read "not arrived". A rank in its
//! k-th barrier sees each peer at k-1 (not arrived), k (arrived) or k+1
//! (arrived, left, entered again): no peer can be further ahead, because
//! that needs this rank in k+1. So counts modulo 128 tell them apart, and
//! the top bit of each byte is left for `ASLEEP`.
//!
//! Sleeping: a waiter marks its own wire `ASLEEP` and fences before its last
//! look (`shm::sleep::line_sleep`); every rank that sees the barrier
//! complete reads the wires again for that mark (`sleepers`). The second
//! read costs nothing on the way out (the line is already here), and a
//! barrier nobody sleeps in makes no system call.

use crate::sync::{AtomicU8, Ordering};

/// A wire's count bits; counts run modulo 128.
pub const COUNT: u8 = 0x7f;

/// A wire's mark while its rank sleeps waiting for the barrier.
pub const ASLEEP: u8 = 0x80;

/// Wires per line (one byte each).
pub const WIRES_PER_LINE: usize = 64;

/// The count that releases the barrier a rank just entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Count(pub u8);

/// Enters a barrier as `rank` on `wires` (one byte per rank): advance our
/// count. Returns the count every wire must reach.
///
/// `mine` holds our count in this process's own memory (it starts at 0,
/// as the wires do), so that an arrival only stores to the shared line.
/// Read back from the wire, our count costs a fetch of the line whenever a
/// peer wrote it since we last looked, as happens at 2 ranks when the rank
/// that saw the release first is back with its next arrival before us
/// (docs/benchmarks.md, 2026-11-26).
///
/// The caller must not enter again before the previous barrier released it.
pub fn arrive(wires: &[AtomicU8], rank: usize, mine: &AtomicU8) -> Count {
    // Only we write our wire, and we are awake: no mark to keep.
    let next = (mine.load(Ordering::Relaxed).wrapping_add(1)) & COUNT;
    mine.store(next, Ordering::Relaxed);
    // Release: what we did before the barrier is seen by whoever sees us
    // arrive.
    wires[rank].store(next, Ordering::Release);
    Count(next)
}

/// Has every wire reached `count` (or one past it: a rank already in the
/// next barrier)?
///
/// SeqCst loads (plain loads on x86, acquire loads on Arm): with a
/// sleeper's SeqCst fence they order this look before `sleepers`' look
/// (see `shm::sleep::line_sleep`).
#[inline]
pub fn is_released(wires: &[AtomicU8], count: Count) -> bool {
    wires.iter().all(|w| arrived(w.load(Ordering::SeqCst), count))
}

/// Whether a wire reading `seen` has arrived in the barrier of `count`.
#[inline]
fn arrived(seen: u8, count: Count) -> bool {
    ((seen & COUNT).wrapping_sub(count.0) & COUNT) <= 1
}

/// After `is_released` said true for `count`: has some peer already
/// arrived in the next barrier? Then the line that brought this release
/// brought that arrival too, two barriers' news in one transfer: at 2
/// ranks with a short way from one barrier to the next that is what holds
/// the barrier to the floor (`examples/line_gap`, `pairs`).
#[inline]
pub fn peer_ahead(wires: &[AtomicU8], count: Count) -> bool {
    wires.iter().any(|w| (w.load(Ordering::Relaxed) & COUNT) == (count.0.wrapping_add(1) & COUNT))
}

/// The diagnostic cargo feature `pairs` (never shipped): MPI_Barrier's line
/// path counts the releases its first polls saw, and those that came with
/// a peer's next arrival (`peer_ahead`), printed at component close: which
/// launches' barriers ran paired (docs/benchmarks.md, "Two barriers per
/// transfer"). A count, no clock: the way between two barriers stays as
/// shipped but for it.
#[cfg(feature = "pairs")]
pub mod pairs {
    use super::{peer_ahead, AtomicU8, Count};
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::Relaxed;

    static RELEASES: AtomicU64 = AtomicU64::new(0);
    static PAIRED: AtomicU64 = AtomicU64::new(0);

    /// After a release of `count` on `wires`. Plain loads and stores, as
    /// on the counted path: where threads barrier at once (MPI_THREAD_MULTIPLE,
    /// each on its own communicator) a count may be lost.
    #[inline(always)]
    pub fn count(wires: &[AtomicU8], count: Count) {
        RELEASES.store(RELEASES.load(Relaxed) + 1, Relaxed);
        if peer_ahead(wires, count) {
            PAIRED.store(PAIRED.load(Relaxed) + 1, Relaxed);
        }
    }

    /// (releases, paired ones) so far.
    pub fn counts() -> (u64, u64) {
        (RELEASES.load(Relaxed), PAIRED.load(Relaxed))
    }
}

/// After `is_released` said true: does some rank sleep, waiting for a
/// wake-up? Read again after that look, in the same order (SeqCst).
#[inline]
pub fn sleepers(wires: &[AtomicU8]) -> bool {
    wires.iter().any(|w| w.load(Ordering::SeqCst) & ASLEEP != 0)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn wires(n: usize) -> Vec<AtomicU8> {
        (0..n).map(|_| AtomicU8::new(0)).collect()
    }

    /// Each rank's own count (`arrive`'s `mine`).
    fn mine(n: usize) -> Vec<AtomicU8> {
        wires(n)
    }

    /// One thread playing all ranks in turn: released only once the last
    /// has arrived, barrier after barrier, across the count's wrap.
    #[test]
    fn released_only_after_all_arrived() {
        for (n, rounds) in [(1, 300), (2, 300), (3, 300), (64, 3), (65, 3), (200, 2)] {
            let (w, m) = (wires(n), mine(n));
            for round in 0..rounds {
                let mut counts = Vec::new();
                for (r, mine) in m.iter().enumerate() {
                    counts.push(arrive(&w, r, mine));
                    for c in &counts {
                        assert_eq!(is_released(&w, *c), r == n - 1, "n={n} r={r} round={round}");
                    }
                }
                assert!(counts.iter().all(|c| c.0 == ((round + 1) % 128) as u8));
            }
        }
    }

    /// A rank already in the next barrier counts as arrived in ours; one a
    /// barrier behind does not; the sleep mark does not change either.
    #[test]
    fn a_peer_ahead_counts_a_peer_behind_does_not() {
        let (w, m) = (wires(2), mine(2));
        let c0 = arrive(&w, 0, &m[0]);
        arrive(&w, 1, &m[1]);
        assert!(is_released(&w, c0));
        assert!(!peer_ahead(&w, c0));
        let c1 = arrive(&w, 1, &m[1]); // rank 1 races into the next barrier
        assert!(is_released(&w, c0), "rank 0 must still leave");
        assert!(peer_ahead(&w, c0), "rank 1's next arrival came with the release");
        assert!(!is_released(&w, c1), "rank 1 must wait for rank 0");
        w[1].fetch_or(ASLEEP, Ordering::SeqCst);
        assert!(sleepers(&w) && !is_released(&w, c1));
        assert!(peer_ahead(&w, c0), "a sleeper's mark is not a count");
        w[0].store(127, Ordering::SeqCst); // counts wrap: 127 + 1 = 0
        m[0].store(127, Ordering::SeqCst);
        w[1].store(127 | ASLEEP, Ordering::SeqCst);
        let a = arrive(&w, 0, &m[0]);
        assert_eq!(a, Count(0));
        assert!(!is_released(&w, a));
        w[1].store(0, Ordering::SeqCst);
        assert!(is_released(&w, a) && !sleepers(&w) && !peer_ahead(&w, a));
        w[1].store(1, Ordering::SeqCst);
        assert!(peer_ahead(&w, a), "one ahead across the wrap");
    }

    /// Threads as ranks: no thread leaves barrier k before all entered k.
    #[test]
    fn threads_never_leave_early() {
        for n in [2, 3, 5, 9] {
            let shared = Arc::new((wires(n), AtomicUsize::new(0)));
            let hs: Vec<_> = (0..n)
                .map(|r| {
                    let sh = shared.clone();
                    std::thread::spawn(move || {
                        let (w, entered) = &*sh;
                        let mine = AtomicU8::new(0);
                        for k in 1..=3000 {
                            entered.fetch_add(1, Ordering::SeqCst);
                            let c = arrive(w, r, &mine);
                            while !is_released(w, c) {
                                std::thread::yield_now();
                            }
                            assert!(entered.load(Ordering::SeqCst) >= k * n, "left early");
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
    }
}
