//! Model check of the sleep/wake protocol (`shm::sleep`) with loom: every
//! interleaving and weak-memory outcome of one waiter that sleeps on a
//! barrier's word and one releaser that releases it and wakes sleepers,
//! on the real protocol code, with a futex model that never times out. A
//! missed wake-up leaves the waiter asleep for ever, which loom reports as
//! a deadlock. The futex model checks the word and goes to sleep under the
//! lock that wakes take, as the kernel does under its hash-bucket lock.
//!
//! The check can fail: the same protocol without its fences (announce and
//! re-check with release/acquire only) loses a wake-up, and loom finds it.
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test --release --test loom_sleep
#![cfg(loom)]

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use mca_coll_hwbarr::core::toggle::{self, Target, Wires};
use mca_coll_hwbarr::core::{line, polled};
use mca_coll_hwbarr::shm::futex::{Futex, Word};
use mca_coll_hwbarr::shm::sleep;
use mca_coll_hwbarr::sync::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Line, Ordering::*};

/// A futex: `wait` checks the word and sleeps in one step with respect to
/// `wake_all`; no timeout and no spurious wake-up, so nothing hides a lost one.
#[derive(Default)]
struct ModelFutex {
    lock: Mutex<()>,
    cv: Condvar,
}

impl Futex for ModelFutex {
    fn wait(&self, word: &impl Word, expected: u32) {
        let g = self.lock.lock().unwrap();
        if word.bits() == expected {
            drop(self.cv.wait(g).unwrap());
        }
    }
    fn wake_all(&self, _word: &impl Word) {
        let _g = self.lock.lock().unwrap();
        self.cv.notify_all();
    }
}

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

struct Counter {
    futex: ModelFutex,
    cell: AtomicI32,
    asleep: AtomicU32,
}

/// The counter barrier: the waiter's counter holds 1 (one packet to come);
/// the releaser sends it and wakes the waiter if it sleeps.
fn counter_model(waiter_sleep: fn(&Counter), releaser_wake: fn(&Counter)) {
    check(move || {
        let c = Arc::new(Counter { futex: ModelFutex::default(), cell: AtomicI32::new(1), asleep: AtomicU32::new(0) });
        let c2 = c.clone();
        let releaser = thread::spawn(move || {
            if c2.cell.fetch_sub(1, AcqRel) == 1 {
                releaser_wake(&c2);
            }
        });
        while c.cell.load(Acquire) > 0 {
            waiter_sleep(&c);
        }
        releaser.join().unwrap();
    });
}

#[test]
fn counter_sleeper_is_always_woken() {
    counter_model(
        |c| sleep::counter_sleep(&c.futex, &c.cell, &c.asleep),
        |c| sleep::counter_wake(&c.futex, &c.cell, &c.asleep),
    );
}

struct Toggle {
    futex: ModelFutex,
    banks: Vec<Line<AtomicU64>>,
    input: AtomicU32,
    sleepers: AtomicU32,
}

impl Toggle {
    fn wires(&self) -> Wires<'_> {
        Wires { banks: &self.banks, input: &self.input }
    }
}

/// The toggle barrier: the waiter waits for the input to flip to 1; the
/// releaser fires the FSM (flips it) and wakes the sleepers.
#[test]
fn toggle_sleeper_is_always_woken() {
    check(|| {
        let t = Arc::new(Toggle {
            futex: ModelFutex::default(),
            banks: vec![Line(AtomicU64::new(0))],
            input: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        });
        let t2 = t.clone();
        let releaser = thread::spawn(move || {
            t2.input.fetch_xor(1, AcqRel);
            sleep::toggle_wake(&t2.futex, &t2.wires(), &t2.sleepers);
        });
        while !toggle::is_released(&t.wires(), Target(1)) {
            sleep::toggle_sleep(&t.futex, &t.wires(), &t.sleepers, Target(1));
        }
        releaser.join().unwrap();
    });
}

/// The polled barrier: the waiter waits for the input to count to 1; rank
/// 0 advances it (from 0, as `poll` does) and wakes the sleepers.
#[test]
fn polled_sleeper_is_always_woken() {
    check(|| {
        let t = Arc::new(Toggle {
            futex: ModelFutex::default(),
            banks: vec![Line(AtomicU64::new(0))],
            input: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        });
        let own: Arc<Vec<Line<AtomicU32>>> = Arc::new(vec![Line(AtomicU32::new(0))]);
        let (t2, own2) = (t.clone(), own.clone());
        let releaser = thread::spawn(move || {
            let w = polled::Wires { own: &own2, entered: &own2, input: &t2.input };
            assert!(t2.input.compare_exchange(0, 1, AcqRel, Acquire).is_ok());
            sleep::polled_wake(&t2.futex, &w, &t2.sleepers);
        });
        let w = polled::Wires { own: &own, entered: &own, input: &t.input };
        while !polled::is_released(&w, polled::Count(1)) {
            sleep::polled_sleep(&t.futex, &w, &t.sleepers, polled::Count(1));
        }
        releaser.join().unwrap();
    });
}

/// Without the fences both sides may read the other's old value (store
/// buffering): the waiter sleeps, the releaser sees no sleeper. Loom must
/// find that execution (a deadlock).
#[test]
#[should_panic(expected = "deadlock")]
fn a_protocol_without_fences_is_caught() {
    counter_model(
        |c| {
            c.asleep.store(1, Release);
            let v = c.cell.load(Acquire);
            if v > 0 {
                c.futex.wait(&c.cell, v as u32);
            }
            c.asleep.store(0, Release);
        },
        |c| {
            if c.asleep.load(Acquire) != 0 {
                c.futex.wake_all(&c.cell);
            }
        },
    );
}

struct LineWires {
    futex: ModelFutex,
    wires: Vec<AtomicU8>,
    doorbell: AtomicU32,
}

/// The line barrier, 2 ranks, one barrier, rank 0 (and rank 1 if
/// `both_sleep`) sleeping whenever its poll finds the barrier not released
/// (as `barrier::device` does: every poll that sees it released calls
/// `line_wake`). No single rank releases it, so both may sleep; whichever
/// sees the barrier complete must wake the other. (The broken variants let
/// only rank 0 sleep: loom cannot unwind a model whose threads all block.)
fn line_model(both_sleep: bool, sleep: fn(&LineWires, usize, line::Count), wake: fn(&LineWires)) {
    check(move || {
        let l = Arc::new(LineWires {
            futex: ModelFutex::default(),
            wires: (0..2).map(|_| AtomicU8::new(0)).collect(),
            doorbell: AtomicU32::new(0),
        });
        let l2 = l.clone();
        let other = thread::spawn(move || {
            line_rank(&l2, 1, if both_sleep { sleep } else { |_, _, _| thread::yield_now() }, wake)
        });
        line_rank(&l, 0, sleep, wake);
        other.join().unwrap();
    });
}

fn line_rank(l: &LineWires, me: usize, sleep: fn(&LineWires, usize, line::Count), wake: fn(&LineWires)) {
    let c = line::arrive(&l.wires, me, &AtomicU8::new(0));
    loop {
        if line::is_released(&l.wires, c) {
            wake(l);
            break;
        }
        sleep(l, me, c);
    }
}

#[test]
fn line_sleepers_are_always_woken() {
    line_model(
        true,
        |l, me, c| sleep::line_sleep(&l.futex, &l.wires, me, c, &l.doorbell),
        |l| sleep::line_wake(&l.futex, &l.wires, &l.doorbell),
    );
}

/// The sleeper's fence matters: without it a sleeper's mark and its last
/// look may be reordered against the other rank's arrival and look.
#[test]
#[should_panic(expected = "deadlock")]
fn a_line_sleeper_without_its_fence_is_caught() {
    line_model(
        false,
        |l, me, c| {
            let rung = l.doorbell.load(SeqCst);
            l.wires[me].store(c.0 | line::ASLEEP, Relaxed);
            if !line::is_released(&l.wires, c) {
                l.futex.wait(&l.doorbell, rung);
            }
            l.wires[me].store(c.0, Relaxed);
        },
        |l| sleep::line_wake(&l.futex, &l.wires, &l.doorbell),
    );
}

/// And so does the waker's ordered second look (`sync::seq_cst_loads`,
/// a fence under loom): without it the look for marks may miss one.
#[test]
#[should_panic(expected = "deadlock")]
fn a_line_waker_without_its_ordered_look_is_caught() {
    line_model(
        false,
        |l, me, c| sleep::line_sleep(&l.futex, &l.wires, me, c, &l.doorbell),
        |l| {
            if l.wires.iter().any(|w| w.load(Acquire) & line::ASLEEP != 0) {
                l.doorbell.fetch_add(1, SeqCst);
                l.futex.wake_all(&l.doorbell);
            }
        },
    );
}
