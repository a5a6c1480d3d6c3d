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
//! `tests/loom_sleep.rs` checks this with loom (all interleavings and
//! weak-memory outcomes, a futex model that never times out), and that a
//! version without the fences is caught.

use crate::core::toggle::{self, Target, Wires};
use crate::shm::futex::Futex;
use crate::sync::{fence, AtomicI32, AtomicU32, Ordering::SeqCst};

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
