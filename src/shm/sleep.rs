//! How a waiter sleeps on a barrier's shared word and how the rank that
//! releases the barrier wakes it, with no lost wake-up and no system call
//! when nobody sleeps.
//!
//! The waiter announces itself (the counter barrier: its `asleep` flag;
//! toggle: the `sleepers` count), fences, re-checks the word, and sleeps
//! only if the barrier is still not released. The releaser changes the
//! word (its packet, or firing the FSM), fences, and wakes only if someone
//! announced. With a SeqCst fence on both sides, either the waiter's
//! re-check sees the release or the releaser sees the announcement (the
//! store-buffering pattern the fences forbid); and a sleeper that went to
//! sleep before the release is woken, because the futex checks the word
//! and sleeps in one step as far as the wake is concerned.
//!
//! The line barrier has no single releaser: every rank that sees it
//! complete looks for sleepers' marks on the wires it just read
//! (`line_sleep`, `line_wake`).
//!
//! `tests/loom_sleep.rs` checks this with loom (all interleavings and
//! weak-memory outcomes, a futex model that never times out), and that a
//! version without the fences is caught.

use crate::core::line::{self, Count, ASLEEP};
use crate::core::polled;
use crate::core::toggle::{self, Target, Wires};
use crate::shm::futex::Futex;
use crate::sync::{
    self, fence, AtomicI32, AtomicU32, AtomicU8, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst,
};

/// Counter barrier, waiter: sleeps on our `counter` while it is above 0
/// (not released), announced in our `asleep` flag.
pub fn counter_sleep(f: &impl Futex, counter: &AtomicI32, asleep: &AtomicU32) {
    asleep.store(1, SeqCst);
    fence(SeqCst);
    let v = counter.load(SeqCst);
    if v > 0 {
        f.wait(counter, v as u32);
    }
    asleep.store(0, SeqCst);
}

/// Counter barrier, releaser: our packet brought the peer's `counter` to
/// 0; wake the peer if its `asleep` flag says it sleeps.
pub fn counter_wake(f: &impl Futex, counter: &AtomicI32, asleep: &AtomicU32) {
    fence(SeqCst);
    if asleep.load(SeqCst) != 0 {
        f.wake_all(counter);
    }
}

/// Toggle barrier, waiter: sleeps on the input wire while it has not
/// toggled to `target`, counted in `sleepers`.
pub fn toggle_sleep(f: &impl Futex, w: &Wires, sleepers: &AtomicU32, target: Target) {
    sleepers.fetch_add(1, SeqCst);
    fence(SeqCst);
    if !toggle::is_released(w, target) {
        f.wait(w.input, target.0 ^ 1);
    }
    sleepers.fetch_sub(1, SeqCst);
}

/// Toggle barrier, releaser: we fired the FSM (flipped the input); wake
/// the sleepers if there are any.
pub fn toggle_wake(f: &impl Futex, w: &Wires, sleepers: &AtomicU32) {
    fence(SeqCst);
    if sleepers.load(SeqCst) != 0 {
        f.wake_all(w.input);
    }
}

/// Polled barrier, a ready waiter: sleeps on the input while it has not
/// reached `target`, counted in `sleepers` (the toggle barrier's protocol
/// on a counting input).
pub fn polled_sleep(f: &impl Futex, w: &polled::Wires, sleepers: &AtomicU32, target: polled::Count) {
    sleepers.fetch_add(1, SeqCst);
    fence(SeqCst);
    if !polled::is_released(w, target) {
        f.wait(w.input, target.before());
    }
    sleepers.fetch_sub(1, SeqCst);
}

/// Polled barrier, rank 0: it advanced the input; wake the sleepers if
/// there are any.
pub fn polled_wake(f: &impl Futex, w: &polled::Wires, sleepers: &AtomicU32) {
    fence(SeqCst);
    if sleepers.load(SeqCst) != 0 {
        f.wake_all(w.input);
    }
}

/// Line barrier, waiter of `count` as rank `me`: marks its wire `ASLEEP`,
/// fences, and sleeps on the `doorbell` unless the barrier is released.
///
/// No lost wake-up: a rank that sees the barrier complete reads the wires
/// again (`line_wake`). If our last look missed some rank's arrival, that
/// look is ordered before every look that sees it (C++20 coherence and the
/// SeqCst order): so a rank that sees the barrier complete and then reads
/// our wire again sees our mark, and rings. The doorbell is read before the
/// mark, so a ring between our look and our sleep changes it and the futex
/// does not sleep; a ring before we read it came from a rank that had seen
/// every arrival, so our look sees them too.
pub fn line_sleep(f: &impl Futex, wires: &[AtomicU8], me: usize, count: Count, doorbell: &AtomicU32) {
    let rung = doorbell.load(SeqCst);
    // Release, as our arrival's store: a peer that sees the barrier
    // released by this value of our wire sees what we did before arriving
    // (rank 0's pick of the line trial among it, `shm::line_pick`).
    wires[me].store(count.0 | ASLEEP, Release);
    fence(SeqCst);
    if !line::is_released(wires, count) {
        f.wait(doorbell, rung);
    }
    wires[me].store(count.0, Relaxed);
}

/// Line barrier, any rank that just saw the barrier complete
/// (`line::is_released` true): rings the doorbell if some rank sleeps.
/// Costs one more read of a line already here when nobody sleeps.
pub fn line_wake(f: &impl Futex, wires: &[AtomicU8], doorbell: &AtomicU32) {
    sync::seq_cst_loads();
    if line::sleepers(wires) {
        doorbell.fetch_add(1, SeqCst);
        f.wake_all(doorbell);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::shm::futex::Kernel;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    /// Threads as ranks on the line barrier (2, 3 and 5 of them), each
    /// sleeping on the doorbell after a few looks:
    /// over many barriers (the 7-bit counts wrap) no thread leaves before
    /// every thread entered, with each thread's own count (`line::arrive`)
    /// and its sleep marks on the same wire.
    #[test]
    fn line_sleepers_over_many_barriers_never_leave_early() {
        const ROUNDS: usize = 600;
        // A long timeout: a lost wake-up shows as a slow test, not as a pass.
        let f = Kernel { timeout: Duration::from_millis(50) };
        for n in [2, 3, 5] {
            let shared = Arc::new((
                (0..n).map(|_| AtomicU8::new(0)).collect::<Vec<_>>(),
                AtomicU32::new(0),
                AtomicUsize::new(0),
            ));
            let started = std::time::Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|r| {
                    let sh = shared.clone();
                    std::thread::spawn(move || {
                        let (wires, doorbell, entered) = &*sh;
                        let mine = AtomicU8::new(0);
                        for k in 1..=ROUNDS {
                            entered.fetch_add(1, SeqCst);
                            let c = line::arrive(wires, r, &mine);
                            let mut looks = 0;
                            while !line::is_released(wires, c) {
                                looks += 1;
                                if looks > 3 {
                                    line_sleep(&f, wires, r, c, doorbell);
                                } else {
                                    std::thread::yield_now();
                                }
                            }
                            line_wake(&f, wires, doorbell);
                            assert!(entered.load(SeqCst) >= k * n, "rank {r} left barrier {k} early");
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            // 600 barriers take well under a second when every sleeper is
            // woken; each lost wake-up costs the 50 ms timeout.
            assert!(started.elapsed() < Duration::from_secs(20), "n={n}: sleepers waited out their timeouts");
        }
    }
}
