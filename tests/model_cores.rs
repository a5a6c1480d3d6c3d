//! Exhaustive model checks of the barrier cores for 3 and 4 ranks over
//! consecutive barriers: a depth-first search over every interleaving of
//! the ranks' atomic operations (sequential consistency), executing the
//! real core code one operation at a time (`counter::charge`/`send`,
//! `toggle::begin`/`step`, `line::arrive`) on real atomics, restoring memory between
//! branches, with visited states merged.
//!
//! Checked in every reachable state: safety (a rank leaves barrier k only
//! after every rank entered k), counter bounds ([-(n-1), n-1]), and
//! liveness (no state where ranks are left but none can move: a waiter is
//! a guard that is enabled once released, so there is no spinning to hide
//! a livelock, and every run ends with all ranks done; where ranks do move
//! while waiting, as polled helpers do, every reachable state must still
//! reach the end). Weak-memory
//! outcomes for 2 ranks are covered by loom (`tests/loom_cores.rs`).
//!
//! The line barrier's `is_released` reads every wire; here it is one step.
//! That hides nothing: while a rank waits in barrier k, a wire that reads
//! arrived (k or k+1) keeps reading so until that rank leaves.
#![cfg(not(loom))]

use std::collections::HashMap;

use mca_coll_hwbarr::core::{counter, line, polled, toggle};
use mca_coll_hwbarr::sync::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Line, Ordering::SeqCst};

/// Where a rank is in its program.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Pc {
    /// About to enter the barrier (marks itself entered).
    Enter,
    Charge,
    /// About to send to its i-th peer.
    Send(usize),
    ToggleBegin,
    Toggle(toggle::Arrival),
    LineArrive,
    PolledArrive,
    /// A polled rank looking at the wires for this target.
    PolledWait(polled::Count),
    /// A polled helper raising the leaders it planned (`State::plans`),
    /// one step each, for this target.
    PolledRaise(polled::Count),
    /// Waiting for release (toggle: for this target).
    Wait(Option<toggle::Target>),
    /// Waiting for every line wire to reach this count.
    LineWait(line::Count),
    Done,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    mem: Vec<i64>,
    entered: Vec<usize>,
    pcs: Vec<(usize, Pc)>, // (barrier number, pc)
    /// Per rank: the raises a polled helper planned and has not done yet.
    plans: Vec<Vec<u32>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Algo {
    Toggle,
    Counter,
    /// The counter with an exit rule one packet short: must be caught.
    BrokenCounter,
    Line,
    /// The line with a wire one barrier behind taken as arrived.
    BrokenLine,
    Polled,
    /// The polled barrier with ranks that leave once ready, not waiting
    /// for the input: must be caught.
    BrokenPolled,
    /// Leaders look only when they arrive, then watch the input; the other
    /// ranks help: plan (`polled::gathers`, one step) and raise each
    /// planned leader in a step of its own, so that raises come late.
    HelpedPolled,
    /// As `HelpedPolled`, with a leader's arrival marked on its wire (as if
    /// the two were one word): must be caught.
    BrokenHelped,
    /// As `HelpedPolled`, with every raise of a helper for the barrier
    /// after (so it always fails): the helpers move for ever and the
    /// barrier never completes, which must be caught.
    FutileHelped,
}

struct Machine {
    n: usize,
    rounds: usize,
    algo: Algo,
    shape: toggle::Shape,
    cells: Vec<Line<AtomicI32>>,
    banks: Vec<Line<AtomicU64>>,
    input: AtomicU32,
    line: Vec<AtomicU8>,
    /// Each rank's own line count (process memory, `line::arrive`'s `mine`).
    line_mine: Vec<AtomicU8>,
    tree: polled::Tree,
    own: Vec<Line<AtomicU32>>,
    arrived: Vec<Line<AtomicU32>>,
}

impl Machine {
    fn new(n: usize, rounds: usize, algo: Algo, width: usize) -> Machine {
        let shape = toggle::Shape::with_width(n, width);
        Machine {
            n,
            rounds,
            algo,
            cells: (0..n).map(|_| Line(AtomicI32::new(0))).collect(),
            banks: (0..shape.banks()).map(|_| Line(AtomicU64::new(0))).collect(),
            input: AtomicU32::new(0),
            line: (0..n).map(|_| AtomicU8::new(0)).collect(),
            line_mine: (0..n).map(|_| AtomicU8::new(0)).collect(),
            tree: polled::Tree::with_width(n, width.min(n.max(2))),
            own: (0..n).map(|_| Line(AtomicU32::new(0))).collect(),
            arrived: (0..n).map(|_| Line(AtomicU32::new(0))).collect(),
            shape,
        }
    }

    fn save(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self.cells.iter().map(|c| c.load(SeqCst) as i64).collect();
        v.extend(self.banks.iter().map(|b| b.load(SeqCst) as i64));
        v.push(self.input.load(SeqCst) as i64);
        v.extend(self.line.iter().map(|w| w.load(SeqCst) as i64));
        v.extend(self.line_mine.iter().map(|w| w.load(SeqCst) as i64));
        v.extend(self.own.iter().map(|w| w.load(SeqCst) as i64));
        v.extend(self.arrived.iter().map(|w| w.load(SeqCst) as i64));
        v
    }

    fn load(&self, mem: &[i64]) {
        let (c, rest) = mem.split_at(self.n);
        let (b, rest) = rest.split_at(self.banks.len());
        let (i, rest) = rest.split_at(1);
        let (l, rest) = rest.split_at(self.n);
        let (m, rest) = rest.split_at(self.n);
        let (o, e) = rest.split_at(self.n);
        self.line_mine.iter().zip(m).for_each(|(a, &v)| a.store(v as u8, SeqCst));
        self.own.iter().zip(o).for_each(|(a, &v)| a.store(v as u32, SeqCst));
        self.arrived.iter().zip(e).for_each(|(a, &v)| a.store(v as u32, SeqCst));
        self.cells.iter().zip(c).for_each(|(a, &v)| a.store(v as i32, SeqCst));
        self.banks.iter().zip(b).for_each(|(a, &v)| a.store(v as u64, SeqCst));
        self.input.store(i[0] as u32, SeqCst);
        self.line.iter().zip(l).for_each(|(a, &v)| a.store(v as u8, SeqCst));
    }

    fn wires(&self) -> toggle::Wires<'_> {
        toggle::Wires { banks: &self.banks, input: &self.input }
    }

    fn polled_wires(&self) -> polled::Wires<'_> {
        let entered = if self.algo == Algo::BrokenHelped { &self.own } else { &self.arrived };
        polled::Wires { own: &self.own, entered, input: &self.input }
    }

    /// A lazy leader's or a helper's wait (`HelpedPolled`): Ok(true) when
    /// released; otherwise the helper's plan, if it has one.
    fn helped(&self, r: usize, t: polled::Count) -> Result<bool, Vec<u32>> {
        let w = self.polled_wires();
        if self.tree.leads(r) {
            return Ok(polled::is_released(&w, t));
        }
        if polled::poll(&self.tree, &w, r, t) == polled::Progress::Released {
            return Ok(true);
        }
        match polled::gathers(&self.tree, &w, t) {
            plan if plan.is_empty() => Ok(false),
            plan => Err(plan),
        }
    }

    fn released(&self, r: usize, pc: Pc) -> bool {
        match (self.algo, pc) {
            (Algo::Polled, Pc::PolledWait(t)) => {
                matches!(
                    polled::poll(&self.tree, &self.polled_wires(), r, t),
                    polled::Progress::Released | polled::Progress::Fired
                )
            }
            (Algo::BrokenPolled, Pc::PolledWait(t)) => {
                polled::poll(&self.tree, &self.polled_wires(), r, t) != polled::Progress::Reading
            }
            (Algo::Toggle, Pc::Wait(Some(t))) => toggle::is_released(&self.wires(), t),
            (Algo::Counter, _) => counter::is_released(&self.cells, r),
            (Algo::BrokenCounter, _) => self.cells[r].load(SeqCst) <= 1,
            (Algo::Line, Pc::LineWait(c)) => line::is_released(&self.line, c),
            (Algo::BrokenLine, Pc::LineWait(c)) => {
                line::is_released(&self.line, line::Count(c.0.wrapping_sub(1) & line::COUNT))
            }
            _ => unreachable!(),
        }
    }

    /// Rank r's next step from `st` (memory already loaded), or None if it
    /// cannot move. Err on a safety violation.
    fn step(&self, st: &State, r: usize) -> Result<Option<State>, String> {
        let pc = st.pcs[r].1;
        let mut next = st.clone();
        let new_pc = match pc {
            Pc::Done => return Ok(None),
            Pc::Enter => {
                next.entered[r] += 1;
                match self.algo {
                    Algo::Toggle => Pc::ToggleBegin,
                    Algo::Line | Algo::BrokenLine => Pc::LineArrive,
                    Algo::Polled
                    | Algo::BrokenPolled
                    | Algo::HelpedPolled
                    | Algo::BrokenHelped
                    | Algo::FutileHelped => Pc::PolledArrive,
                    Algo::Counter | Algo::BrokenCounter => Pc::Charge,
                }
            }
            Pc::Charge => {
                counter::charge(&self.cells, r);
                if self.n > 1 {
                    Pc::Send(1)
                } else {
                    Pc::Wait(None)
                }
            }
            Pc::Send(i) => {
                counter::send(&self.cells, counter::peer(&self.cells, r, i));
                if i + 1 < self.n {
                    Pc::Send(i + 1)
                } else {
                    Pc::Wait(None)
                }
            }
            Pc::ToggleBegin => Pc::Toggle(toggle::begin(&self.wires(), r)),
            Pc::Toggle(mut a) => match toggle::step(&self.shape, &self.wires(), &mut a) {
                Some((t, _)) => Pc::Wait(Some(t)),
                None => Pc::Toggle(a),
            },
            Pc::LineArrive => Pc::LineWait(line::arrive(&self.line, r, &self.line_mine[r])),
            Pc::PolledArrive => Pc::PolledWait(polled::arrive(&self.tree, &self.polled_wires(), r).0),
            Pc::PolledRaise(t) => {
                let leader = next.plans[r].remove(0);
                let count = if self.algo == Algo::FutileHelped { polled::Count(t.0 + 1) } else { t };
                polled::raise(&self.polled_wires(), leader as usize, count);
                if next.plans[r].is_empty() {
                    Pc::PolledWait(t)
                } else {
                    Pc::PolledRaise(t)
                }
            }
            Pc::PolledWait(t) if matches!(self.algo, Algo::HelpedPolled | Algo::BrokenHelped | Algo::FutileHelped) => {
                match self.helped(r, t) {
                    Ok(true) => self.leave(st, &mut next, r)?,
                    Ok(false) => return Ok(None),
                    Err(plan) => {
                        next.plans[r] = plan;
                        Pc::PolledRaise(t)
                    }
                }
            }
            Pc::Wait(_) | Pc::LineWait(_) | Pc::PolledWait(_) => {
                if !self.released(r, pc) {
                    // A poll may have moved the wires (a leader got ready):
                    // a step that changed memory is a move.
                    let mem = self.save();
                    if mem == st.mem {
                        return Ok(None);
                    }
                    next.mem = mem;
                    return Ok(Some(next));
                }
                self.leave(st, &mut next, r)?
            }
        };
        next.pcs[r].1 = new_pc;
        next.mem = self.save();
        for (q, &v) in next.mem[..self.n].iter().enumerate() {
            if v.unsigned_abs() >= self.n as u64 {
                return Err(format!("counter of rank {q} at {v}, outside [-(n-1), n-1]"));
            }
        }
        Ok(Some(next))
    }

    /// Rank r leaves its barrier: Err if some rank has not entered it.
    fn leave(&self, st: &State, next: &mut State, r: usize) -> Result<Pc, String> {
        let k = st.pcs[r].0;
        if let Some(q) = (0..self.n).find(|&q| st.entered[q] < k) {
            return Err(format!("rank {r} left barrier {k} before rank {q} entered it"));
        }
        next.pcs[r].0 += 1;
        Ok(if k == self.rounds { Pc::Done } else { Pc::Enter })
    }

    /// Explores every interleaving; returns the number of distinct states.
    fn check(&self) -> Result<usize, String> {
        let init = State {
            mem: self.save(),
            entered: vec![0; self.n],
            pcs: vec![(1, Pc::Enter); self.n],
            plans: vec![Vec::new(); self.n],
        };
        // Every state once, with its successors, for the liveness check.
        let mut index = HashMap::from([(init.clone(), 0usize)]);
        let mut states = vec![init];
        let mut succ: Vec<Vec<usize>> = vec![Vec::new()];
        let mut stack = vec![0usize];
        let mut stuck = None;
        while let Some(i) = stack.pop() {
            let st = states[i].clone();
            let mut moved = false;
            for r in 0..self.n {
                self.load(&st.mem);
                if let Some(next) = self.step(&st, r)? {
                    moved = true;
                    let j = *index.entry(next.clone()).or_insert_with(|| {
                        states.push(next);
                        succ.push(Vec::new());
                        stack.push(states.len() - 1);
                        states.len() - 1
                    });
                    succ[i].push(j);
                }
            }
            if !moved && !st.pcs.iter().all(|&(_, pc)| pc == Pc::Done) && stuck.is_none() {
                // Searched on: a rank leaving early, if any, says more.
                stuck = Some(format!("stuck: no rank can move in {st:?}"));
            }
        }
        if let Some(e) = stuck {
            return Err(e);
        }
        // Liveness beyond "some rank can move": from every reachable state
        // the end (every rank done) stays reachable, so no cycle of moves
        // that never completes a barrier (helpers whose raises all fail).
        let mut pred: Vec<Vec<usize>> = vec![Vec::new(); states.len()];
        for (i, js) in succ.iter().enumerate() {
            js.iter().for_each(|&j| pred[j].push(i));
        }
        let mut live = vec![false; states.len()];
        let mut work: Vec<usize> =
            (0..states.len()).filter(|&i| states[i].pcs.iter().all(|&(_, pc)| pc == Pc::Done)).collect();
        work.iter().for_each(|&i| live[i] = true);
        while let Some(j) = work.pop() {
            for &i in &pred[j] {
                if !live[i] {
                    live[i] = true;
                    work.push(i);
                }
            }
        }
        match live.iter().position(|&l| !l) {
            Some(i) => Err(format!("livelock: the end is unreachable from {:?}", states[i])),
            None => Ok(states.len()),
        }
    }
}

fn check(n: usize, rounds: usize, algo: Algo) -> Result<usize, String> {
    Machine::new(n, rounds, algo, 64).check()
}

#[test]
fn toggle_is_safe_and_live() {
    for (n, rounds) in [(2, 4), (3, 3), (4, 3), (5, 2)] {
        let states = check(n, rounds, Algo::Toggle).unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("n={n} rounds={rounds}: {states} states");
        assert!(states > 10);
    }
}

/// Banks of 2 wires: 4 and 5 ranks make trees of 3 and 4 levels, so bank
/// completion propagating upwards is checked too.
#[test]
fn toggle_tree_is_safe_and_live() {
    for (n, rounds) in [(3, 3), (4, 3), (5, 2)] {
        let states = Machine::new(n, rounds, Algo::Toggle, 2).check().unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("tree n={n} rounds={rounds}: {states} states");
    }
}

#[test]
fn counter_is_safe_live_and_bounded() {
    for (n, rounds) in [(2, 4), (3, 3), (4, 3), (5, 2)] {
        let states = check(n, rounds, Algo::Counter).unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("n={n} rounds={rounds}: {states} states");
        assert!(states > 10);
    }
}

#[test]
fn line_is_safe_and_live() {
    for (n, rounds) in [(2, 4), (3, 3), (4, 3), (5, 2)] {
        let states = check(n, rounds, Algo::Line).unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("line n={n} rounds={rounds}: {states} states");
        assert!(states > 10);
    }
}

/// Groups of 2: 3 ranks make rank 0 read ranks 1 and 2 across two levels,
/// 4 and 5 ranks put leaders between the root and the leaves.
#[test]
fn polled_is_safe_and_live() {
    for (n, rounds, width) in [(2, 4, 32), (3, 3, 32), (3, 3, 2), (4, 3, 2), (5, 2, 2)] {
        let states = Machine::new(n, rounds, Algo::Polled, width).check().unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("polled n={n} rounds={rounds} width={width}: {states} states");
        assert!(states > 10);
    }
}

/// Leaders that look only at arrival, helped by the other ranks, whose
/// raises may come any number of steps after their reads: same trees.
#[test]
fn helped_polled_is_safe_and_live() {
    for (n, rounds, width) in [(2, 4, 32), (3, 3, 32), (3, 3, 2), (4, 3, 2), (5, 3, 2), (6, 2, 2)] {
        let states =
            Machine::new(n, rounds, Algo::HelpedPolled, width).check().unwrap_or_else(|e| panic!("n={n}: {e}"));
        eprintln!("helped polled n={n} rounds={rounds} width={width}: {states} states");
        assert!(states > 10);
    }
}

/// The search can fail: an exit rule one packet short is caught, and so
/// is a line that takes a wire one barrier behind as arrived, a polled
/// rank that leaves once it is ready, a helper that takes a polled
/// leader's arrival for its ranks' readiness, and helpers whose raises
/// all fail (moving for ever: a livelock, not a stuck state).
#[test]
fn broken_exit_rule_is_caught() {
    let e = check(3, 2, Algo::BrokenCounter).unwrap_err();
    assert!(e.contains("before rank"), "{e}");
    let e = check(3, 2, Algo::BrokenLine).unwrap_err();
    assert!(e.contains("before rank"), "{e}");
    let e = Machine::new(3, 2, Algo::BrokenPolled, 2).check().unwrap_err();
    assert!(e.contains("before rank"), "{e}");
    let e = Machine::new(4, 1, Algo::BrokenHelped, 2).check().unwrap_err();
    assert!(e.contains("before rank"), "{e}");
    let e = Machine::new(4, 1, Algo::FutileHelped, 2).check().unwrap_err();
    assert!(e.contains("livelock"), "{e}");
}
