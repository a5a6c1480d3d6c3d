//! Model checks of the barrier cores with loom: every interleaving and
//! every weak-memory outcome (up to loom's preemption bound) of two
//! ranks-as-threads running three consecutive barriers on the real core
//! code. Safety: no rank leaves barrier k before every rank entered
//! barrier k. Liveness: every rank leaves every barrier (loom fails a model
//! whose threads spin forever, and the joins must return). Counter bounds:
//! every counter stays within [-(n-1), n-1]. Three and more ranks are
//! covered exhaustively (sequentially consistent) in `tests/model_cores.rs`,
//! loom's state space being too large for spinning waiters there.
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test --release --test loom_cores
#![cfg(loom)]

use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use mca_coll_hwbarr::core::{counter, line, polled, toggle};
use mca_coll_hwbarr::sync::{relax, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Line};

/// Per-rank count of barriers entered, checked by every leaving rank; the
/// model's verdict, and this execution's.
struct Entered(Vec<AtomicUsize>, std::sync::Arc<AtomicBool>, loom::sync::atomic::AtomicBool);

impl Entered {
    fn new(n: usize, violated: std::sync::Arc<AtomicBool>) -> Self {
        Entered((0..n).map(|_| AtomicUsize::new(0)).collect(), violated, loom::sync::atomic::AtomicBool::new(false))
    }
    fn enter(&self, rank: usize) {
        self.0[rank].fetch_add(1, SeqCst);
    }
    /// Records (loom cannot unwind out of a model, so no panic) a rank
    /// leaving barrier k before some rank entered it.
    fn check_all_entered(&self, k: usize) {
        if self.0.iter().any(|e| e.load(SeqCst) < k) {
            self.1.store(true, StdOrdering::SeqCst);
            self.2.store(true, SeqCst);
        }
    }
    /// Has some rank left early in this execution? (A broken core may then
    /// leave the others waiting for ever: they stop.)
    fn violated(&self) -> bool {
        self.2.load(SeqCst)
    }
    /// Records a rank that waits on and on: a lost barrier (loom would
    /// otherwise report only that the model ran out of branches).
    fn stuck(&self) {
        self.1.store(true, StdOrdering::SeqCst);
        self.2.store(true, SeqCst);
    }
}

/// Runs `f` under loom; returns whether any execution violated safety.
fn model(f: impl Fn(std::sync::Arc<AtomicBool>) + Sync + Send + 'static) -> bool {
    let violated = std::sync::Arc::new(AtomicBool::new(false));
    let v = violated.clone();
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    // Spinning waiters make long paths; a real livelock still fails.
    b.max_branches = 200_000;
    b.check(move || f(v.clone()));
    violated.load(StdOrdering::SeqCst)
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

fn toggle_model(n: usize, rounds: usize) -> bool {
    toggle_model_on(toggle::Shape::new(n), rounds)
}

fn toggle_model_on(shape: toggle::Shape, rounds: usize) -> bool {
    let n = shape.ranks();
    model(move |violated| {
        let shape = shape.clone();
        let banks: Arc<Vec<Line<AtomicU64>>> = Arc::new((0..shape.banks()).map(|_| Line(AtomicU64::new(0))).collect());
        let input = Arc::new(AtomicU32::new(0));
        let entered = Arc::new(Entered::new(n, violated));
        run_ranks(n, rounds, move |r, k| {
            let w = toggle::Wires { banks: &banks, input: &input };
            entered.enter(r);
            let (t, _) = toggle::arrive(&shape, &w, r);
            while !toggle::is_released(&w, t) {
                relax();
            }
            entered.check_all_entered(k);
        });
    })
}

fn counter_model(n: usize, rounds: usize, released: fn(&[Line<AtomicI32>], usize) -> bool) -> bool {
    model(move |violated| {
        let cells: Arc<Vec<Line<AtomicI32>>> = Arc::new((0..n).map(|_| Line(AtomicI32::new(0))).collect());
        let entered = Arc::new(Entered::new(n, violated));
        run_ranks(n, rounds, move |r, k| {
            entered.enter(r);
            counter::arrive(&cells, r);
            while !released(&cells, r) {
                relax();
            }
            entered.check_all_entered(k);
            for c in cells.iter() {
                let v = c.load(SeqCst);
                assert!(v.unsigned_abs() < n as u32, "counter {v} out of [-(n-1), n-1]");
            }
        });
    })
}

#[test]
fn toggle_2_ranks_3_barriers() {
    assert!(!toggle_model(2, 3), "a rank left a barrier early");
}

/// A tree that follows cache domains: the two ranks in two L3 domains
/// (one bank each), their banks meeting at the root.
#[test]
fn toggle_2_ranks_in_2_domains_2_barriers() {
    let shape = toggle::Shape::grouped(&[[Some(0), Some(0)], [Some(0), Some(1)]]);
    assert_eq!(shape.describe(), "2/1");
    assert!(!toggle_model_on(shape, 2), "a rank left a barrier early");
}

#[test]
fn counter_2_ranks_3_barriers() {
    assert!(!counter_model(2, 3, counter::is_released), "a rank left a barrier early");
}

/// The model check can fail: an exit rule one packet short lets a rank
/// leave before its peer entered, and loom must find that execution.
#[test]
fn counter_with_an_exit_rule_one_packet_short_is_caught() {
    assert!(counter_model(2, 2, |cells, r| cells[r].load(SeqCst) <= 1));
}

fn line_model(n: usize, rounds: usize, released: fn(&[AtomicU8], line::Count) -> bool) -> bool {
    model(move |violated| {
        let wires: Arc<Vec<AtomicU8>> = Arc::new((0..n).map(|_| AtomicU8::new(0)).collect());
        let entered = Arc::new(Entered::new(n, violated));
        let mine: Arc<Vec<AtomicU8>> = Arc::new((0..n).map(|_| AtomicU8::new(0)).collect());
        run_ranks(n, rounds, move |r, k| {
            entered.enter(r);
            let c = line::arrive(&wires, r, &mine[r]);
            while !released(&wires, c) {
                relax();
            }
            entered.check_all_entered(k);
        });
    })
}

#[test]
fn line_2_ranks_3_barriers() {
    assert!(!line_model(2, 3, line::is_released), "a rank left a barrier early");
}

/// A scan one wire short lets rank 0 leave before rank 1 entered; loom
/// must find that execution.
#[test]
fn line_with_a_scan_one_wire_short_is_caught() {
    assert!(line_model(2, 2, |w, c| line::is_released(&w[..w.len() - 1], c)));
}

/// Looks after which a polled rank counts as stuck: far more than any
/// interleaving of a working barrier of two ranks needs (each look of a
/// waiter follows a step of its peer, loom's `relax` being a yield).
const STUCK_AFTER: usize = 64;

/// How the polled model's ranks wait.
#[derive(Clone, Copy, PartialEq)]
enum Waiting {
    /// Every rank looks (`poll`) until released.
    Looking,
    /// A leader that got ready leaves without waiting for the input.
    LeavingWhenReady,
    /// Leaders look once, at arrival, then watch the input only; the other
    /// ranks help (`help`) at every other look.
    LazyLeaders,
    /// As `LazyLeaders`, but the helpers raise the root without reading.
    RaisingBlind,
}

fn polled_model(tree: polled::Tree, rounds: usize, how: Waiting) -> bool {
    let n = tree.ranks();
    model(move |violated| {
        let tree = tree.clone();
        let lines = || -> Arc<Vec<Line<AtomicU32>>> { Arc::new((0..n).map(|_| Line(AtomicU32::new(0))).collect()) };
        let (own, arrived) = (lines(), lines());
        let input = Arc::new(AtomicU32::new(0));
        let entered = Arc::new(Entered::new(n, violated));
        run_ranks(n, rounds, move |r, k| {
            let w = polled::Wires { own: &own, entered: &arrived, input: &input };
            entered.enter(r);
            let (t, mut p) = polled::arrive(&tree, &w, r);
            let done = |p| match p {
                polled::Progress::Released | polled::Progress::Fired => true,
                polled::Progress::Waiting => how == Waiting::LeavingWhenReady,
                polled::Progress::Reading => false,
            };
            let mut looks = 0;
            while !done(p) {
                if entered.violated() {
                    return;
                }
                relax();
                looks += 1;
                if looks > STUCK_AFTER {
                    return entered.stuck();
                }
                let lazy = matches!(how, Waiting::LazyLeaders | Waiting::RaisingBlind);
                p = match (lazy, tree.leads(r), looks % 2) {
                    (true, true, _) if polled::is_released(&w, t) => polled::Progress::Released,
                    (true, true, _) => polled::Progress::Reading,
                    (true, false, 1) if how == Waiting::RaisingBlind => polled::raise(&w, 0, t),
                    (true, false, 1) => polled::help(&tree, &w, t),
                    _ => polled::poll(&tree, &w, r, t),
                };
            }
            entered.check_all_entered(k);
        });
    })
}

#[test]
fn polled_2_ranks_3_barriers() {
    assert!(!polled_model(polled::Tree::new(2), 3, Waiting::Looking), "a rank left a barrier early");
}

/// A rank that leaves once its wire is raised, not waiting for the input,
/// leaves early; loom must find that execution.
#[test]
fn polled_leaving_when_ready_is_caught() {
    assert!(polled_model(polled::Tree::new(2), 1, Waiting::LeavingWhenReady));
}

/// Rank 0 looks only when it arrives; rank 1 helps it (reads its arrival
/// and raises the input for it).
#[test]
fn polled_helped_2_ranks_3_barriers() {
    assert!(!polled_model(polled::Tree::new(2), 3, Waiting::LazyLeaders), "a rank left a barrier early");
}

/// A helper that raises the input without reading rank 0's arrival
/// releases a barrier rank 0 has not entered; loom must find that.
#[test]
fn polled_helper_raising_blind_is_caught() {
    assert!(polled_model(polled::Tree::new(2), 1, Waiting::RaisingBlind));
}
