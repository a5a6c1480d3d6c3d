//! The DMA-counter barrier of IBM's Blue Gene patent, in software.
//!
//! Hardware: every node has a barrier counter that may go negative. On entry
//! a node adds n-1 to its own counter and its DMA engine sends one barrier
//! control packet to every other node; each packet received decrements the
//! receiver's counter by one. The node exits when its counter reaches 0.
//!
//! Software: a counter is an `AtomicI32` in shared memory and a packet is a
//! remote `fetch_sub(1)`. The exit rule is `counter <= 0`, not `== 0`:
//! hardware catches the instant the counter passes 0, but a polling waiter
//! can miss a transient 0 when a fast peer has already left and sent its
//! packet for the next barrier.
//!
//! Why `<= 0` is safe and the counter bounded (also model-checked, see
//! `tests/loom_cores.rs`): while rank r is in its k-th barrier its counter is
//! `(n-1)k - Σ_q p(q)`, where p(q) counts packets q delivered to r. No peer
//! has sent for barrier k+2 (that needs r in k+1), and one that sent for k+1
//! left k, which needs every rank in k. So `Σ p ≥ (n-1)k` — the counter at
//! or below 0 — holds only if every peer entered k. Bounds: `Σ p ≤ (n-1)(k+1)`
//! gives a floor of -(n-1); the counter was at most 0 when r left barrier
//! k-1 and only r adds, so it never exceeds n-1. No overflow ever, for any
//! n < 2^31.

use crate::sync::{AtomicI32, Line, Ordering};

/// Enter a barrier as `rank` on `cells` (one counter per rank): charge our
/// counter with n-1 and send one packet to every peer.
pub fn arrive(cells: &[Line<AtomicI32>], rank: usize) {
    arrive_with(cells, rank, |_| {});
}

/// `arrive`, calling `released(q)` for each peer q whose counter our packet
/// brought down to 0 — the moment a sleeping q must be woken.
pub fn arrive_with(cells: &[Line<AtomicI32>], rank: usize, mut released: impl FnMut(usize)) {
    charge(cells, rank);
    for i in 1..cells.len() {
        let q = peer(cells, rank, i);
        if send(cells, q) {
            released(q);
        }
    }
}

/// First step of `arrive`: add n-1 to our own counter.
pub fn charge(cells: &[Line<AtomicI32>], rank: usize) {
    let n = cells.len();
    debug_assert!(rank < n && n <= i32::MAX as usize);
    cells[rank].fetch_add((n - 1) as i32, Ordering::AcqRel);
}

/// The i-th peer (1 ≤ i < n) `rank` sends to: starting after ourselves, so
/// that ranks hit different counters first.
pub fn peer(cells: &[Line<AtomicI32>], rank: usize, i: usize) -> usize {
    (rank + i) % cells.len()
}

/// One barrier control packet: decrement the receiver's counter. True when
/// this packet released the receiver (its counter went from 1 to 0: only
/// the owner adds, so a counter reaches 0 from above only this way).
pub fn send(cells: &[Line<AtomicI32>], to: usize) -> bool {
    cells[to].fetch_sub(1, Ordering::AcqRel) == 1
}

/// Has every peer's packet for our current barrier arrived?
#[inline]
pub fn is_released(cells: &[Line<AtomicI32>], rank: usize) -> bool {
    cells[rank].load(Ordering::Acquire) <= 0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn cells(n: usize) -> Vec<Line<AtomicI32>> {
        (0..n).map(|_| Line(AtomicI32::new(0))).collect()
    }

    #[test]
    fn sequential_release_only_after_all() {
        for n in [1, 2, 3, 8] {
            let c = cells(n);
            for _round in 0..3 {
                for r in 0..n {
                    arrive(&c, r);
                    for q in 0..=r {
                        assert_eq!(is_released(&c, q), r == n - 1, "n={n} r={r} q={q}");
                    }
                }
            }
        }
    }

    /// A fast peer already in the next barrier drives our counter below 0;
    /// we must still leave (the transient 0 is missed).
    #[test]
    fn fast_peer_in_next_barrier_does_not_trap_us() {
        let c = cells(2);
        arrive(&c, 0);
        arrive(&c, 1);
        assert!(is_released(&c, 1));
        arrive(&c, 1); // rank 1 races into barrier 2 before rank 0 polls
        assert_eq!(c[0].load(Ordering::SeqCst), -1);
        assert!(is_released(&c, 0)); // `== 0` would hang here
        assert!(!is_released(&c, 1)); // rank 1 must wait for rank 0
    }

    #[test]
    fn threads_never_leave_early_and_stay_bounded() {
        for n in [2, 3, 5, 9] {
            let shared = Arc::new((cells(n), AtomicUsize::new(0)));
            let hs: Vec<_> = (0..n)
                .map(|r| {
                    let sh = shared.clone();
                    std::thread::spawn(move || {
                        let (c, entered) = &*sh;
                        for k in 1..=2000 {
                            entered.fetch_add(1, Ordering::SeqCst);
                            arrive(c, r);
                            while !is_released(c, r) {
                                std::thread::yield_now();
                            }
                            assert!(entered.load(Ordering::SeqCst) >= k * n, "left early");
                            for cell in c.iter() {
                                let v = cell.load(Ordering::SeqCst);
                                assert!(v.abs() < n as i32, "counter {v} out of bounds");
                            }
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
