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

/// The bank tree: which bank and bit each rank's wire is (level 0), and
/// each complete bank's wire one level up, to a single root bank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Per level, each member's bank (index into all banks) and bit.
    levels: Vec<Vec<(u32, u8)>>,
    /// Per bank, the bits that are real wires.
    masks: Vec<u64>,
    /// Per bank, its index as a member of the level above.
    up: Vec<u32>,
}

/// A member's group key at each level (the path of cache domains it lies
/// in, outermost first); a level up, the innermost part is dropped.
type Key = Vec<Option<u32>>;

impl Shape {
    /// Banks of 64 ranks in rank order, and so on up.
    pub fn new(n: usize) -> Shape {
        Shape::with_width(n, BANK_WIRES)
    }

    /// A tree whose banks use only `width` wires (1 < width ≤ 64), so that a
    /// model checker sees several levels with a handful of ranks.
    pub fn with_width(n: usize, width: usize) -> Shape {
        assert!(n >= 1, "a barrier needs at least one rank");
        assert!(width > 1 && width <= BANK_WIRES);
        Shape::build(vec![Vec::new(); n], width)
    }

    /// A tree that follows the ranks' cache domains: `paths[r]` is rank
    /// r's (package, L3 domain). Level 0 has one bank per L3 domain (more
    /// if it holds over 64 ranks), level 1 one per package, then the root:
    /// a bank is written only by ranks of one domain, or by one climber
    /// from each domain below. Ranks with an unknown part share a group
    /// there. Every rank computes the same tree from the same paths.
    pub fn grouped(paths: &[[Option<u32>; 2]]) -> Shape {
        assert!(!paths.is_empty(), "a barrier needs at least one rank");
        Shape::build(paths.iter().map(|p| p.to_vec()).collect(), BANK_WIRES)
    }

    /// Groups the members of each level by key (in key order, members in
    /// index order), `width` to a bank, until one bank is left.
    fn build(mut keys: Vec<Key>, width: usize) -> Shape {
        let mut s = Shape { levels: Vec::new(), masks: Vec::new(), up: Vec::new() };
        loop {
            let mut groups: std::collections::BTreeMap<&Key, Vec<usize>> = Default::default();
            for (m, k) in keys.iter().enumerate() {
                groups.entry(k).or_default().push(m);
            }
            let mut slots = vec![(0u32, 0u8); keys.len()];
            let mut above: Vec<Key> = Vec::new();
            for (key, members) in groups {
                for chunk in members.chunks(width) {
                    let bank = s.masks.len();
                    for (bit, &m) in chunk.iter().enumerate() {
                        slots[m] = (bank as u32, bit as u8);
                    }
                    s.masks.push(if chunk.len() == BANK_WIRES { u64::MAX } else { (1u64 << chunk.len()) - 1 });
                    s.up.push(above.len() as u32);
                    let mut k = key.clone();
                    k.pop();
                    above.push(k);
                }
            }
            s.levels.push(slots);
            if above.len() == 1 {
                return s;
            }
            keys = above;
        }
    }

    /// Bank words the tree needs in all.
    pub fn banks(&self) -> usize {
        self.masks.len()
    }

    /// Ranks served.
    pub fn ranks(&self) -> usize {
        self.levels[0].len()
    }

    /// Banks per level, bottom up ("24/2/1"), for verbose output.
    pub fn describe(&self) -> String {
        let per: Vec<String> = (0..self.levels.len())
            .map(|l| {
                let first = self.levels[l].iter().map(|&(b, _)| b).min().unwrap_or(0);
                let last = self.levels[l].iter().map(|&(b, _)| b).max().unwrap_or(0);
                (last - first + 1).to_string()
            })
            .collect();
        per.join("/")
    }

    /// The most banks any tree for `n` ranks (grouped or not) needs: at
    /// most n at each of the two domain levels, then at most a 64th of the
    /// level below each.
    pub fn max_banks(n: usize) -> usize {
        let mut total = 2 * n;
        let mut members = n;
        while members > 1 {
            members = members.div_ceil(BANK_WIRES);
            total += members;
        }
        total + 1
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
    let Some(level) = shape.levels.get(a.level) else {
        // The root bank became uniform: the FSM changes state, all inputs flip.
        wires.input.store(a.target, Ordering::Release);
        return Some((target, true));
    };
    let (bank, bit) = level[a.idx];
    let (bank, bit) = (bank as usize, 1u64 << bit);
    let mask = shape.masks[bank];
    // AcqRel: the bank's RMW chain carries every earlier arriver's writes
    // to the rank that finds the bank uniform.
    let now = wires.banks[bank].fetch_xor(bit, Ordering::AcqRel) ^ bit;
    let uniform = if a.target == 1 { mask } else { 0 };
    if now & mask != uniform {
        return Some((target, false));
    }
    // This bank is complete: toggle its wire one level up.
    a.level += 1;
    a.idx = shape.up[bank] as usize;
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
        alloc_shape(Shape::new(n))
    }

    fn alloc_shape(s: Shape) -> (Shape, Vec<Line<AtomicU64>>, AtomicU32) {
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
        assert_eq!((s.masks[0], s.masks[1], s.masks[2]), (u64::MAX, 1, 0b11));
        assert_eq!(Shape::with_width(5, 2).banks(), 3 + 2 + 1);
        for n in [1, 2, 64, 65, 192, 4097] {
            assert!(Shape::new(n).banks() <= Shape::max_banks(n));
        }
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
            threads_through(Shape::new(n), if n > 8 { 300 } else { 3000 });
        }
    }

    /// Threads as the ranks of `shape`, `rounds` barriers: none leaves
    /// barrier k before all entered it.
    fn threads_through(shape: Shape, rounds: usize) {
        let n = shape.ranks();
        let (s, banks, input) = alloc_shape(shape);
        let shared = Arc::new((s, banks, input, AtomicUsize::new(0)));
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

    /// (package, L3) of rank r: `l3` domains of `per` ranks per package,
    /// ranks dealt round-robin over `domains` L3 domains (so that rank
    /// order and domain order differ).
    fn dealt(n: usize, domains: u32, per_package: u32) -> Vec<[Option<u32>; 2]> {
        (0..n as u32).map(|r| [Some((r % domains) / per_package), Some(r % domains)]).collect()
    }

    /// A 2-package, 12-L3-per-package, 8-core machine filled compactly: one
    /// bank per L3 domain holding only its ranks, one per package holding
    /// only its domains' banks, then the root; each rank's climb touches
    /// one bank per level.
    #[test]
    fn grouped_tree_follows_the_cache_domains() {
        let paths: Vec<[Option<u32>; 2]> = (0..192u32).map(|r| [Some(r / 96), Some(r / 8)]).collect();
        let s = Shape::grouped(&paths);
        assert_eq!(s.describe(), "24/2/1");
        assert_eq!(s.banks(), 27);
        assert!(s.banks() <= Shape::max_banks(192));
        // Level 0: a bank's members share an L3 domain.
        for (r, &(b, _)) in s.levels[0].iter().enumerate() {
            let same: Vec<usize> = (0..192).filter(|&q| s.levels[0][q].0 == b).collect();
            assert!(same.iter().all(|&q| paths[q] == paths[r]), "bank {b} mixes domains");
            assert_eq!(same.len(), 8);
        }
        // Level 1: a package bank's members are the banks of its domains.
        for r in 0..192 {
            let leaf = s.levels[0][r].0 as usize;
            let (pkg_bank, _) = s.levels[1][s.up[leaf] as usize];
            let (root, _) = s.levels[2][s.up[pkg_bank as usize] as usize];
            assert_eq!(pkg_bank as usize, 24 + r / 96, "rank {r}'s package bank");
            assert_eq!(root, 26);
        }
        // Unknown places group together, 64 to a bank; one domain is flat.
        assert_eq!(Shape::grouped(&vec![[None, None]; 130]).describe(), "3/1");
        assert_eq!(Shape::grouped(&[[Some(0), Some(0)]; 2]), Shape::new(2));
        assert_eq!(Shape::grouped(&dealt(16, 4, 2)).describe(), "4/2/1");
    }

    /// Grouped trees whose domains do not follow rank order: only the last
    /// arrival fires, barrier after barrier, and threads never leave early.
    #[test]
    fn grouped_trees_release_only_when_all_arrived() {
        for (n, domains, per) in [(5, 2, 1), (16, 4, 2), (70, 3, 3), (200, 6, 2)] {
            let (s, banks, input) = alloc_shape(Shape::grouped(&dealt(n, domains, per)));
            let w = Wires { banks: &banks, input: &input };
            for round in 0..3u32 {
                for r in 0..n {
                    let (t, fired) = arrive(&s, &w, r);
                    assert_eq!(t, Target((round + 1) & 1));
                    assert_eq!(fired, r == n - 1, "n={n} r={r} round={round}");
                }
            }
        }
        for (n, domains, per) in [(6, 3, 1), (12, 4, 2)] {
            threads_through(Shape::grouped(&dealt(n, domains, per)), 500);
        }
    }
}
