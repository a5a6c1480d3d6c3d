//! The toggle-wire barrier of the TUC Hardware Barrier, in software.
//!
//! Hardware: every node has one output wire and one input wire; a central
//! two-state FSM flips every input when all outputs are 1 (state 0→1) or all
//! are 0 (1→0). A node reads its input, writes the toggled value to its
//! output and waits until its input toggles.
//!
//! Software: an output wire is one bit of a 64-bit "bank" word, and the FSM's
//! test "all outputs agree" is the value a `fetch_xor` returns, so the rank
//! whose toggle makes the bank uniform is the one that fires the FSM — no
//! rank ever scans the others. Banks of 64 wires form a tree (the uniform bank
//! toggles its own bit one level up), so any number of ranks works: the
//! prototype's 60-node cap is gone. All inputs are one shared word, because
//! the hardware flips them all at once. Wires never reset: the next barrier
//! simply toggles them back.

use crate::sync::{AtomicU32, AtomicU64, Line, Ordering};

/// Wires per bank word.
pub const BANK_WIRES: usize = 64;

/// Shape of the bank tree for `n` ranks: (first bank, members) per level,
/// from the ranks' own wires (level 0) up to a single root bank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    levels: Vec<(usize, usize)>,
    /// Wires used per bank: BANK_WIRES, fewer only to model-check deep trees.
    width: usize,
}

impl Shape {
    pub fn new(n: usize) -> Shape {
        Shape::with_width(n, BANK_WIRES)
    }

    /// A tree whose banks use only `width` wires (1 < width ≤ 64), so that a
    /// model checker sees several levels with a handful of ranks.
    pub fn with_width(n: usize, width: usize) -> Shape {
        assert!(n >= 1, "a barrier needs at least one rank");
        assert!(width > 1 && width <= BANK_WIRES);
        let mut levels = Vec::new();
        let (mut first, mut members) = (0, n);
        loop {
            levels.push((first, members));
            let banks = members.div_ceil(width);
            if banks == 1 {
                return Shape { levels, width };
            }
            first += banks;
            members = banks;
        }
    }

    /// Bank words the tree needs in all.
    pub fn banks(&self) -> usize {
        let &(first, _) = self.levels.last().unwrap();
        first + 1
    }

    /// Ranks served.
    pub fn ranks(&self) -> usize {
        self.levels[0].1
    }

    /// Bits of bank `b` (index within its level) that are real wires.
    fn mask(&self, members: usize, b: usize) -> u64 {
        let used = (members - b * self.width).min(self.width);
        if used == BANK_WIRES {
            u64::MAX
        } else {
            (1u64 << used) - 1
        }
    }
}

/// The wires of one barrier, wherever they live.
pub struct Wires<'a> {
    /// Output wires packed into banks, `shape.banks()` of them.
    pub banks: &'a [Line<AtomicU64>],
    /// The input wire every rank reads (all inputs flip together).
    pub input: &'a AtomicU32,
}

/// The input value that will release the barrier a rank just entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target(pub u32);

/// A rank's way through `arrive`, one atomic operation per `step`, so that
/// a model checker can interleave ranks between any two of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arrival {
    target: u32,
    level: usize,
    idx: usize,
}

/// Reads the input: the start of an arrival as `rank`.
pub fn begin(wires: &Wires, rank: usize) -> Arrival {
    Arrival { target: wires.input.load(Ordering::Acquire) ^ 1, level: 0, idx: rank }
}

/// One step of an arrival: toggle one wire (ours, or a completed bank's
/// one level up), or fire the FSM. `Some` when the arrival is over: the
/// target to wait for, and whether this rank fired the FSM.
pub fn step(shape: &Shape, wires: &Wires, a: &mut Arrival) -> Option<(Target, bool)> {
    let target = Target(a.target);
    let Some(&(first, members)) = shape.levels.get(a.level) else {
        // The root bank became uniform: the FSM changes state, all inputs flip.
        wires.input.store(a.target, Ordering::Release);
        return Some((target, true));
    };
    let (b, bit) = (a.idx / shape.width, 1u64 << (a.idx % shape.width));
    let mask = shape.mask(members, b);
    // AcqRel: the bank's RMW chain carries every earlier arriver's writes
    // to the rank that finds the bank uniform.
    let now = wires.banks[first + b].fetch_xor(bit, Ordering::AcqRel) ^ bit;
    let uniform = if a.target == 1 { mask } else { 0 };
    if now & mask != uniform {
        return Some((target, false));
    }
    // This bank is complete: toggle its wire one level up.
    a.level += 1;
    a.idx = b;
    None
}

/// Enter a barrier as `rank`: read the input, write the toggled value to our
/// output wire, and — if that made all outputs agree — let the FSM flip the
/// input. Returns the input value to wait for, and whether this rank fired
/// the FSM (it is then already released).
///
/// The caller must not enter again before the previous barrier released it.
pub fn arrive(shape: &Shape, wires: &Wires, rank: usize) -> (Target, bool) {
    debug_assert!(rank < shape.ranks() && wires.banks.len() >= shape.banks());
    let mut a = begin(wires, rank);
    loop {
        if let Some(done) = step(shape, wires, &mut a) {
            return done;
        }
    }
}

/// Has the input toggled to `target`, releasing the barrier?
#[inline]
pub fn is_released(wires: &Wires, target: Target) -> bool {
    wires.input.load(Ordering::Acquire) == target.0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn alloc(n: usize) -> (Shape, Vec<Line<AtomicU64>>, AtomicU32) {
        let s = Shape::new(n);
        let banks = (0..s.banks()).map(|_| Line(AtomicU64::new(0))).collect();
        (s, banks, AtomicU32::new(0))
    }

    #[test]
    fn shape_grows_a_level_every_64x() {
        assert_eq!(Shape::new(1).banks(), 1);
        assert_eq!(Shape::new(64).banks(), 1);
        assert_eq!(Shape::new(65).banks(), 3); // 2 leaves + root
        assert_eq!(Shape::new(4096).banks(), 65);
        assert_eq!(Shape::new(4097).banks(), 65 + 2 + 1);
        let s = Shape::new(65);
        assert_eq!(s.mask(65, 1), 1);
        assert_eq!(s.mask(64, 0), u64::MAX);
        assert_eq!(Shape::with_width(5, 2).banks(), 3 + 2 + 1);
    }

    /// Single thread playing all ranks in turn: only the last arrival
    /// fires, for any size (tree shapes included), barrier after barrier.
    #[test]
    fn last_arrival_fires_sequentially() {
        for n in [1, 2, 3, 63, 64, 65, 130, 4097] {
            let (s, banks, input) = alloc(n);
            let w = Wires { banks: &banks, input: &input };
            for round in 0..3u32 {
                for r in 0..n {
                    let (t, fired) = arrive(&s, &w, r);
                    assert_eq!(t, Target((round + 1) & 1));
                    assert_eq!(fired, r == n - 1, "n={n} r={r} round={round}");
                    assert_eq!(is_released(&w, t), r == n - 1);
                }
            }
        }
    }

    /// Threads as nodes: no thread leaves barrier k before all entered k.
    #[test]
    fn threads_never_leave_early() {
        for n in [2, 3, 5, 70] {
            let (s, banks, input) = alloc(n);
            let shared = Arc::new((s, banks, input, AtomicUsize::new(0)));
            let rounds = if n > 8 { 300 } else { 3000 };
            let hs: Vec<_> = (0..n)
                .map(|r| {
                    let sh = shared.clone();
                    std::thread::spawn(move || {
                        let (s, banks, input, entered) = &*sh;
                        let w = Wires { banks, input };
                        for k in 1..=rounds {
                            entered.fetch_add(1, Ordering::SeqCst);
                            let (t, _) = arrive(s, &w, r);
                            while !is_released(&w, t) {
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
