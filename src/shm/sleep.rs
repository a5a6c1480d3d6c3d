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
use crate::sync::{self, fence, AtomicI32, AtomicU32, AtomicU8, Ordering::Relaxed, Ordering::SeqCst};

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
    wires[me].store(count.0 | ASLEEP, Relaxed);
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
