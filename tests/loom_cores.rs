//! Model checks of the barrier cores with loom: every interleaving (up to
//! loom's preemption bound) of ranks-as-threads running consecutive
//! barriers. Safety: no rank leaves barrier k before every rank entered
//! barrier k. Liveness: every rank leaves every barrier (loom fails a model
//! whose threads spin forever, and the joins below must return).
//! Counter bounds: every counter stays within [-(n-1), n-1].
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test --release --test loom_cores
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use mca_coll_hwbarr::core::{counter, toggle};
use mca_coll_hwbarr::sync::{relax, AtomicI32, AtomicU32, AtomicU64, Line};

/// Per-rank count of barriers entered, checked by every leaving rank.
struct Entered(Vec<AtomicUsize>);

impl Entered {
    fn new(n: usize) -> Self {
        Entered((0..n).map(|_| AtomicUsize::new(0)).collect())
    }
    fn enter(&self, rank: usize) {
        self.0[rank].fetch_add(1, SeqCst);
    }
    fn assert_all_entered(&self, k: usize) {
        for (q, e) in self.0.iter().enumerate() {
            assert!(e.load(SeqCst) >= k, "left barrier {k} before rank {q} entered it");
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    // Spinning waiters make long paths; a real livelock still fails.
    b.max_branches = 200_000;
    b.check(f);
}

fn run_ranks(n: usize, rounds: usize, body: impl Fn(usize, usize) + Send + Sync + 'static) {
    let body = Arc::new(body);
    let hs: Vec<_> = (1..n)
        .map(|r| {
            let b = body.clone();
            thread::spawn(move || (1..=rounds).for_each(|k| b(r, k)))
        })
        .collect();
    (1..=rounds).for_each(|k| body(0, k));
    for h in hs {
        h.join().unwrap();
    }
}

fn toggle_model(n: usize, rounds: usize) {
    model(move || {
        let shape = toggle::Shape::new(n);
        let banks: Arc<Vec<Line<AtomicU64>>> = Arc::new((0..shape.banks()).map(|_| Line(AtomicU64::new(0))).collect());
        let input = Arc::new(AtomicU32::new(0));
        let entered = Arc::new(Entered::new(n));
        run_ranks(n, rounds, move |r, k| {
            let w = toggle::Wires { banks: &banks, input: &input };
            entered.enter(r);
            let (t, _) = toggle::arrive(&shape, &w, r);
            while !toggle::is_released(&w, t) {
                relax();
            }
            entered.assert_all_entered(k);
        });
    });
}

fn counter_model(n: usize, rounds: usize) {
    model(move || {
        let cells: Arc<Vec<Line<AtomicI32>>> = Arc::new((0..n).map(|_| Line(AtomicI32::new(0))).collect());
        let entered = Arc::new(Entered::new(n));
        run_ranks(n, rounds, move |r, k| {
            entered.enter(r);
            counter::arrive(&cells, r);
            while !counter::is_released(&cells, r) {
                relax();
            }
            entered.assert_all_entered(k);
            for c in cells.iter() {
                let v = c.load(SeqCst);
                assert!(v.unsigned_abs() < n as u32, "counter {v} out of [-(n-1), n-1]");
            }
        });
    });
}

#[test]
fn toggle_2_ranks_3_barriers() {
    toggle_model(2, 3);
}

#[test]
fn toggle_3_ranks_2_barriers() {
    toggle_model(3, 2);
}

#[test]
fn counter_2_ranks_3_barriers() {
    counter_model(2, 3);
}

#[test]
fn counter_3_ranks_2_barriers() {
    counter_model(3, 2);
}
