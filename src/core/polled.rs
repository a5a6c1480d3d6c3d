//! The toggle-wire barrier with the FSM split over the node's cache
//! domains: every rank's output wire is a cache line of its own, and one
//! rank per L3 domain (its leader) plays the FSM for its domain, reading
//! its members' wires with loads in flight together. The leaders' own
//! wires are read the same way by the root, which then flips the single
//! input wire every rank waits on.
//!
//! Why: in the toggle barrier's banks (`toggle`) the ranks of a domain take
//! turns on one bank word, each `fetch_xor` a line transfer after the one
//! before, so a domain of 8 arriving together costs 8 transfers in a row
//! and a socket's 12 domain climbers 12 more. Here each member writes its
//! own line once and the leader's reads of all of them overlap: a domain
//! costs about one transfer, the root's reads of the leaders about one
//! more (`docs/many-core.md`: 0.71-0.93× the best of xhc, acoll and
//! MPICH at 64-192 ranks on a 2-socket, 24-CCX model, where the bank tree
//! is 1.9-3.2×). The release stays one shared line, as in the hardware.
//!
//! The input counts barriers (wrapping), and a wire holds the count of the
//! barrier its rank is ready in: ready means arrived, and for a leader also
//! that every rank it reads is ready. A leader is driven by polls (`poll`),
//! so the wait loop and MPI_Ibarrier's progress advance it without any
//! state but the wires. A poll may come late, with the count of a barrier
//! long over (the express lane tests tickets it cannot tell from current
//! ones): counts, not bits, let it see that, and its writes are
//! compare-and-swaps from the barrier before, so a late one changes nothing.
//!
//! A leader also marks its arrival on a line of its own (`entered`), so
//! that any rank can do its reading for it (`help`): a non-blocking barrier
//! whose leader computes without calling MPI still completes for the ranks
//! that test it, as the toggle and counter barriers do (their last arrival
//! releases). The same compare-and-swaps make a helper's late or
//! concurrent write harmless.

use crate::sync::{AtomicU32, Line, Ordering};

/// The input count that releases the barrier a rank just entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Count(pub u32);

impl Count {
    /// The input's count while this barrier is not released yet.
    pub fn before(self) -> u32 {
        self.0.wrapping_sub(1)
    }
}

/// Most ranks in a group: a larger domain is split into groups of this
/// many (their leaders climb like domains'), and the root reads at most
/// this many leaders (otherwise the leaders are grouped by package first).
/// A core keeps about 10-20 misses in flight: a leader that reads more
/// lines than that fetches them in rounds, where a level more costs one
/// transfer. The cost model (`docs/many-core.md`, "Group width") puts 16
/// within 1.33× of the best width it tried (8, 16, 32) with anything from
/// 8 misses in flight to no limit, where 32 is up to 1.76× and 8 up to
/// 1.38×.
pub const MAX_FAN_IN: usize = 16;

/// Who reads whose wire: a tree over the ranks, rooted at rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Per rank: the ranks whose wires it reads (empty unless it leads).
    children: Vec<Vec<u32>>,
    /// Groups formed at each level, bottom up (for verbose output).
    levels: Vec<usize>,
}

impl Tree {
    /// Groups of `MAX_FAN_IN` ranks in rank order, and so on up.
    pub fn new(n: usize) -> Tree {
        Tree::build(vec![Vec::new(); n], MAX_FAN_IN)
    }

    /// A tree whose groups hold at most `width` ranks (1 < width), so that
    /// tests and model checks see several levels with a handful of ranks.
    pub fn with_width(n: usize, width: usize) -> Tree {
        assert!(width > 1);
        Tree::build(vec![Vec::new(); n], width)
    }

    /// A tree that follows the ranks' cache domains: `paths[r]` is rank r's
    /// (package, L3 domain). Ranks of one L3 domain are read by its lowest
    /// rank; the domains' leaders by rank 0, unless they are more than
    /// `MAX_FAN_IN` (then by package first). Ranks with an unknown part
    /// share a group there. Every rank computes the same tree.
    pub fn grouped(paths: &[[Option<u32>; 2]]) -> Tree {
        Tree::grouped_by(paths, MAX_FAN_IN)
    }

    /// As `grouped`, with groups of at most `width` ranks (1 < width): the
    /// cost model weighs other widths (`examples/topo_model.rs`).
    pub fn grouped_by(paths: &[[Option<u32>; 2]], width: usize) -> Tree {
        assert!(width > 1);
        Tree::build(paths.iter().map(|p| p.to_vec()).collect(), width)
    }

    fn build(keys: Vec<Vec<Option<u32>>>, width: usize) -> Tree {
        let n = keys.len();
        assert!(n >= 1, "a barrier needs at least one rank");
        let mut t = Tree { children: vec![Vec::new(); n], levels: Vec::new() };
        // Climbers of the current level: (key, rank), in rank order.
        let mut climbers: Vec<(Vec<Option<u32>>, u32)> = keys.into_iter().zip(0..).collect();
        let mut first = true;
        while climbers.len() > 1 {
            if !first && climbers.len() <= width {
                // Few enough to be read by one rank: the root.
                t.children[climbers[0].1 as usize].extend(climbers[1..].iter().map(|c| c.1));
                t.levels.push(1);
                break;
            }
            let mut groups: std::collections::BTreeMap<Vec<Option<u32>>, Vec<u32>> = Default::default();
            for (k, r) in &climbers {
                groups.entry(k.clone()).or_default().push(*r);
            }
            let before = climbers.len();
            let mut next = Vec::new();
            let mut formed = 0;
            for (mut key, ranks) in groups {
                key.pop();
                for chunk in ranks.chunks(width) {
                    t.children[chunk[0] as usize].extend(&chunk[1..]);
                    next.push((key.clone(), chunk[0]));
                    formed += 1;
                }
            }
            next.sort_by_key(|c| c.1);
            climbers = next;
            first = false;
            if climbers.len() < before {
                t.levels.push(formed);
            }
        }
        t
    }

    /// Ranks served.
    pub fn ranks(&self) -> usize {
        self.children.len()
    }

    /// The ranks whose wires `rank` reads.
    pub fn children(&self, rank: usize) -> &[u32] {
        &self.children[rank]
    }

    /// Does `rank` read wires (the root always does, if only none)?
    pub fn leads(&self, rank: usize) -> bool {
        rank == 0 || !self.children[rank].is_empty()
    }

    /// Groups per level, bottom up ("24/1"), for verbose output.
    pub fn describe(&self) -> String {
        let per: Vec<String> = self.levels.iter().map(|g| g.to_string()).collect();
        per.join("/")
    }
}

/// The wires of one barrier, wherever they live.
pub struct Wires<'a> {
    /// Each rank's output wire, on its own line.
    pub own: &'a [Line<AtomicU32>],
    /// Each leader's arrival (the count of the barrier it entered last),
    /// on a line of its own: its wire says more (its ranks are ready too).
    pub entered: &'a [Line<AtomicU32>],
    /// The input wire every rank reads (all inputs flip together).
    pub input: &'a AtomicU32,
}

/// Where a rank stands after a look at the wires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The input flipped: the barrier is over for us.
    Released,
    /// We were the root and flipped the input just now (wake sleepers).
    Fired,
    /// Ready, waiting for the input only (may sleep on it).
    Waiting,
    /// Some rank we read is not ready yet: we must look again (never
    /// sleep: nobody would wake us).
    Reading,
}

/// Enters a barrier as `rank`: reads the input and, if it leads nobody,
/// raises its wire (a leader marks its arrival). Returns the input value to
/// wait for and the first look (a leader whose ranks are all ready is ready
/// at once; the root then fires).
///
/// The caller must not enter again before the previous barrier released it.
pub fn arrive(tree: &Tree, w: &Wires, rank: usize) -> (Count, Progress) {
    debug_assert!(rank < tree.ranks() && w.own.len() >= tree.ranks() && w.entered.len() >= tree.ranks());
    let target = Count(w.input.load(Ordering::Acquire).wrapping_add(1));
    // Release: what we did before the barrier is seen by whoever sees
    // our wire (and, through its own release, by every rank), or our
    // arrival if it reads for us (`help`).
    if !tree.leads(rank) {
        w.own[rank].store(target.0, Ordering::Release);
        return (target, Progress::Waiting);
    }
    w.entered[rank].store(target.0, Ordering::Release);
    (target, poll(tree, w, rank, target))
}

/// One look at the wires for the barrier of `target` as `rank`: released?
/// If not, and we lead, are all the ranks we read ready? Then raise our
/// wire, or, at the root, advance the input. A look with the count of a
/// barrier already over says `Released` and writes nothing.
pub fn poll(tree: &Tree, w: &Wires, rank: usize, target: Count) -> Progress {
    // The input first: once it moved, a fast rank may already be in the
    // next barrier and its wire no longer says this one.
    if released(w.input.load(Ordering::Acquire), target) {
        return Progress::Released;
    }
    if rank != 0 && w.own[rank].load(Ordering::Relaxed) == target.0 {
        return Progress::Waiting;
    }
    if !tree.leads(rank) {
        // A rank that leads nobody raised its wire when it arrived.
        return Progress::Waiting;
    }
    // Every load issued before any is tested, so that the misses overlap.
    let ready =
        tree.children[rank].iter().fold(true, |all, &c| all & (w.own[c as usize].load(Ordering::Acquire) == target.0));
    if !ready {
        return Progress::Reading;
    }
    raise(w, rank, target)
}

/// Raises leader `rank`'s wire, or at the root advances the input, for the
/// barrier of `target`: the caller saw the leader arrived and every rank
/// it reads ready. From the barrier before only: if the caller's look is
/// late (loaded the wires of a barrier since completed), the word has
/// moved on and the swap fails. Release: the chain of readiness carries
/// every rank's writes before the barrier to every rank released.
pub fn raise(w: &Wires, rank: usize, target: Count) -> Progress {
    let from_before = |word: &AtomicU32| {
        word.compare_exchange(target.before(), target.0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    };
    if rank == 0 {
        // Every rank is ready: the FSM changes state, all inputs flip.
        return if from_before(w.input) { Progress::Fired } else { Progress::Released };
    }
    from_before(&w.own[rank]);
    Progress::Waiting
}

/// The reading a helper can do for the leaders of the barrier of `target`,
/// as the leaders it can raise, each after the ones it reads (`raise` them
/// in order): a leader that arrived and whose ranks are ready or in the
/// list before it. Empty once the barrier is released, or if nothing can
/// be done yet.
pub fn gathers(tree: &Tree, w: &Wires, target: Count) -> Vec<u32> {
    /// Is `rank`'s wire ready, given the raises already planned?
    fn ready(tree: &Tree, w: &Wires, rank: usize, target: Count, plan: &mut Vec<u32>) -> bool {
        if rank != 0 && w.own[rank].load(Ordering::Acquire) == target.0 {
            return true;
        }
        if !tree.leads(rank) || w.entered[rank].load(Ordering::Acquire) != target.0 {
            return false;
        }
        // Stops at the first rank not ready: the barrier cannot complete
        // before it is, and once every rank entered, one call raises all.
        let all = tree.children[rank].iter().all(|&c| ready(tree, w, c as usize, target, plan));
        if all {
            plan.push(rank as u32);
        }
        all
    }
    let mut plan = Vec::new();
    if !released(w.input.load(Ordering::Acquire), target) {
        ready(tree, w, 0, target, &mut plan);
    }
    plan
}

/// Does every leader's reading that can be done for the barrier of `target`
/// (`gathers`, then `raise` each): any rank may call it, for a barrier it
/// entered. `Fired` if it advanced the input.
pub fn help(tree: &Tree, w: &Wires, target: Count) -> Progress {
    if released(w.input.load(Ordering::Acquire), target) {
        return Progress::Released;
    }
    let mut last = Progress::Waiting;
    for leader in gathers(tree, w, target) {
        last = raise(w, leader as usize, target);
    }
    last
}

/// Does an input reading `input` release the barrier of `target` (or a
/// later one: a late look)? Counts wrap; a barrier is at most 2^31 behind.
#[inline]
fn released(input: u32, target: Count) -> bool {
    (input.wrapping_sub(target.0) as i32) >= 0
}

/// Has the input reached `target`, releasing the barrier?
#[inline]
pub fn is_released(w: &Wires, target: Count) -> bool {
    released(w.input.load(Ordering::Acquire), target)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;

    /// The wires of `n` ranks, all zero.
    struct Mem {
        own: Vec<Line<AtomicU32>>,
        entered: Vec<Line<AtomicU32>>,
        input: AtomicU32,
    }

    impl Mem {
        fn new(n: usize) -> Mem {
            let lines = || (0..n).map(|_| Line(AtomicU32::new(0))).collect();
            Mem { own: lines(), entered: lines(), input: AtomicU32::new(0) }
        }

        fn wires(&self) -> Wires<'_> {
            Wires { own: &self.own, entered: &self.entered, input: &self.input }
        }

        /// Every wire and the input, as they are now.
        fn state(&self) -> (Vec<u32>, u32) {
            (self.own.iter().map(|o| o.load(Ordering::SeqCst)).collect(), self.input.load(Ordering::SeqCst))
        }
    }

    /// Every rank but 0 is read by exactly one rank, and following the
    /// readers from any rank reaches 0 (a tree, rooted at 0).
    fn check_tree(t: &Tree) {
        let n = t.ranks();
        let mut parent = vec![None; n];
        for r in 0..n {
            let most = (MAX_FAN_IN - 1) * t.levels.len().max(1);
            assert!(t.children(r).len() <= most, "rank {r} reads {} wires", t.children(r).len());
            for &c in t.children(r) {
                assert!(parent[c as usize].replace(r).is_none(), "rank {c} read twice");
            }
        }
        assert!(parent[0].is_none());
        for r in 1..n {
            let (mut x, mut hops) = (r, 0);
            while let Some(p) = parent[x] {
                x = p;
                hops += 1;
                assert!(hops <= n);
            }
            assert_eq!(x, 0, "rank {r} does not reach the root");
        }
    }

    #[test]
    fn trees_read_each_rank_once_and_reach_rank_0() {
        for n in [1, 2, 3, 32, 33, 64, 192, 1025, 5000] {
            let t = Tree::new(n);
            check_tree(&t);
        }
        assert_eq!(Tree::new(1).describe(), "");
        assert_eq!(Tree::new(16).describe(), "1");
        assert_eq!(Tree::new(17).describe(), "2/1");
        assert_eq!(Tree::new(1025).describe(), "65/5/1");
        assert_eq!(Tree::with_width(5, 2).describe(), "3/2/1");
        check_tree(&Tree::with_width(5, 2));
    }

    /// The 2-socket, 12-CCX, 8-core machine of the model, filled
    /// compactly: each CCX's lowest rank reads its 7 others; 24 leaders are
    /// too many for the root, so each socket's lowest rank reads its 11
    /// other CCX leaders and rank 0 reads rank 96. Dealt round-robin over
    /// the sockets, the groups still hold only ranks of one CCX, or CCX
    /// leaders of one socket.
    #[test]
    fn grouped_tree_reads_each_domain_then_its_leaders() {
        let paths: Vec<[Option<u32>; 2]> = (0..192u32).map(|r| [Some(r / 96), Some(r / 8)]).collect();
        let t = Grouped::of(&paths);
        assert_eq!(t.describe(), "24/2/1");
        assert_eq!(t.children(8), (9..16).collect::<Vec<u32>>());
        assert_eq!(t.children(96), (97..104).chain((13..24).map(|d| d * 8)).collect::<Vec<u32>>());
        let root: Vec<u32> = (1..8).chain((1..12).map(|d| d * 8)).chain([96]).collect();
        assert_eq!(t.children(0), root);
        let dealt: Vec<[Option<u32>; 2]> = (0..192u32).map(|r| [Some(r % 2), Some((r % 2) * 12 + r / 16)]).collect();
        let t = Grouped::of(&dealt);
        let leads = |c: usize| (0..c).all(|q| dealt[q][1] != dealt[c][1]);
        for r in 0..192 {
            for &c in t.children(r) {
                let c = c as usize;
                let same_socket = dealt[c][0] == dealt[r][0];
                assert!(dealt[c] == dealt[r] || (leads(c) && (same_socket || r == 0)), "rank {r} reads rank {c}");
            }
        }
        // 48 domains of 4: 24 leaders per socket, in groups of 16 and 8.
        let many: Vec<[Option<u32>; 2]> = (0..192u32).map(|r| [Some(r / 96), Some(r / 4)]).collect();
        assert_eq!(Grouped::of(&many).describe(), "48/4/1");
        // A domain larger than MAX_FAN_IN is split.
        assert_eq!(Grouped::of(&vec![[Some(0), Some(0)]; 64]).describe(), "4/1");
        assert_eq!(Grouped::of(&vec![[None, None]; 40]), Tree::new(40));
    }

    struct Grouped;
    impl Grouped {
        fn of(paths: &[[Option<u32>; 2]]) -> Tree {
            let t = Tree::grouped(paths);
            check_tree(&t);
            t
        }
    }

    /// One thread playing all ranks in turn, leaders last: only rank 0
    /// fires, and only when every rank arrived.
    #[test]
    fn root_fires_once_all_arrived() {
        for t in [Tree::new(1), Tree::new(2), Tree::new(70), Tree::with_width(9, 2)] {
            let n = t.ranks();
            let m = Mem::new(n);
            let w = m.wires();
            for round in 0..4u32 {
                let mut targets = Vec::new();
                for r in (0..n).rev() {
                    let (target, p) = arrive(&t, &w, r);
                    assert_eq!(target, Count(round + 1));
                    assert_eq!(p == Progress::Fired, r == 0, "n={n} r={r}");
                    targets.push(target);
                }
                assert!(is_released(&w, targets[0]));
            }
            // Rank 0 first: it cannot fire until the others arrived.
            if n > 1 {
                let (target, p) = arrive(&t, &w, 0);
                assert_eq!(p, Progress::Reading);
                for r in 1..n {
                    assert!(!is_released(&w, target));
                    arrive(&t, &w, r);
                }
                // Leaders above the leaves may still need a look.
                let mut fired = false;
                for _ in 0..n {
                    for r in (0..n).rev() {
                        fired |= poll(&t, &w, r, target) == Progress::Fired;
                    }
                }
                assert!(fired && is_released(&w, target));
            }
        }
    }

    /// A late look (the count of a barrier since completed, as the express
    /// lane may test) writes nothing: at the root it would release a
    /// barrier rank 0 never entered, at a leader raise a wire for one.
    #[test]
    fn a_late_look_changes_nothing() {
        for (t, looker) in [(Tree::new(2), 0), (Tree::with_width(4, 2), 2), (Tree::with_width(4, 2), 0)] {
            let n = t.ranks();
            let m = Mem::new(n);
            let (w, own, input) = (m.wires(), &m.own, &m.input);
            let mut first = None;
            for _ in 0..2 {
                for r in (0..n).rev() {
                    let (c, _) = arrive(&t, &w, r);
                    first.get_or_insert(c);
                }
                for _ in 0..n {
                    for r in (0..n).rev() {
                        poll(&t, &w, r, first.unwrap());
                    }
                }
            }
            let (stale, before) = (first.unwrap(), input.load(Ordering::SeqCst));
            assert_eq!(before, 2, "two barriers done");
            // Every rank but the looker enters barrier 3.
            for r in (0..n).filter(|&r| r != looker) {
                arrive(&t, &w, r);
            }
            let wires: Vec<u32> = own.iter().map(|o| o.load(Ordering::SeqCst)).collect();
            assert_eq!(poll(&t, &w, looker, stale), Progress::Released);
            assert_eq!(help(&t, &w, stale), Progress::Released);
            assert!(gathers(&t, &w, stale).is_empty());
            assert_eq!(input.load(Ordering::SeqCst), before, "the input moved");
            let after: Vec<u32> = own.iter().map(|o| o.load(Ordering::SeqCst)).collect();
            assert_eq!(after, wires, "a wire moved");
        }
    }

    /// Leaders that arrive and then look no more (an MPI_Ibarrier whose
    /// leader computes): any rank's help completes the barrier once every
    /// rank entered, and not before; a raise planned before the barrier
    /// completed and done after it changes nothing.
    #[test]
    fn helpers_complete_a_barrier_whose_leaders_do_not_look() {
        let paths: Vec<[Option<u32>; 2]> = (0..12u32).map(|r| [Some(r % 2), Some(r % 4)]).collect();
        for t in [Tree::new(2), Tree::new(5), Tree::with_width(9, 2), Tree::grouped(&paths)] {
            let n = t.ranks();
            let m = Mem::new(n);
            let w = m.wires();
            for round in 1..=3u32 {
                // Leaders first, so that their one look finds ranks missing;
                // a help after every arrival (by any rank: it needs none).
                let mut order: Vec<usize> = (0..n).filter(|&r| t.leads(r)).collect();
                order.extend((0..n).filter(|&r| !t.leads(r)));
                let mut stale = Vec::new();
                for (i, &r) in order.iter().enumerate() {
                    let (target, p) = arrive(&t, &w, r);
                    assert_eq!(target, Count(round));
                    let last = i + 1 == n;
                    assert!(p != Progress::Fired, "n={n}: rank {r} fired with a leaf missing");
                    if i + 2 == n {
                        // What a helper could raise with one rank missing,
                        // raised again once the barrier is over.
                        stale = gathers(&t, &w, target);
                    }
                    let h = help(&t, &w, target);
                    assert_eq!(is_released(&w, target), last, "n={n} round {round}: released after {} of {n}", i + 1);
                    assert_eq!(h == Progress::Fired, last, "n={n}");
                }
                let before = m.state();
                for leader in stale {
                    raise(&w, leader as usize, Count(round));
                }
                assert_eq!(m.state(), before, "a late raise wrote");
            }
        }
    }

    /// A raise planned for barrier 1 and done while barrier 3 is in flight
    /// (a helper thread of a rank whose other thread went on) writes
    /// nothing: with a plain store it moved the input back.
    #[test]
    fn a_raise_planned_two_barriers_ago_changes_nothing() {
        let t = Tree::with_width(4, 2); // 0 reads 1 and 2; 2 reads 3
        let m = Mem::new(4);
        let w = m.wires();
        for r in [0, 2, 1, 3] {
            arrive(&t, &w, r);
        }
        let plan = gathers(&t, &w, Count(1));
        assert_eq!(plan, vec![2, 0]);
        assert_eq!(help(&t, &w, Count(1)), Progress::Fired);
        for r in [0, 2, 1, 3] {
            arrive(&t, &w, r);
        }
        assert_eq!(help(&t, &w, Count(2)), Progress::Fired);
        for r in [2, 3] {
            arrive(&t, &w, r);
        }
        poll(&t, &w, 2, Count(3));
        let before = m.state();
        assert_eq!(before, (vec![0, 2, 3, 3], 2));
        for leader in plan {
            raise(&w, leader as usize, Count(1));
        }
        assert_eq!(m.state(), before, "a raise planned for barrier 1 wrote");
    }

    /// A helper raises nothing for a leader that has not arrived, its
    /// ranks all ready or not: a middle leader, and rank 0.
    #[test]
    fn helpers_wait_for_a_missing_leader() {
        for missing in [2, 0] {
            let t = Tree::with_width(4, 2);
            let m = Mem::new(4);
            let w = m.wires();
            for r in (0..4).filter(|&r| r != missing) {
                let (c, _) = arrive(&t, &w, r);
                assert_ne!(help(&t, &w, c), Progress::Fired, "fired with rank {missing} missing");
                assert!(!is_released(&w, c));
            }
            let (c, _) = arrive(&t, &w, missing);
            help(&t, &w, c);
            assert!(is_released(&w, c));
        }
    }

    /// Counts wrap: a barrier whose count passes 2^32 releases like any.
    #[test]
    fn counts_wrap() {
        let t = Tree::new(3);
        let m = Mem::new(3);
        m.input.store(u32::MAX - 1, Ordering::SeqCst);
        m.own.iter().chain(&m.entered).for_each(|o| o.store(u32::MAX - 1, Ordering::SeqCst));
        let w = m.wires();
        for want in [u32::MAX, 0, 1] {
            let all: Vec<(Count, Progress)> = (0..3).rev().map(|r| arrive(&t, &w, r)).collect();
            let c = all[2];
            assert_eq!(c, (Count(want), Progress::Fired));
            assert!(is_released(&w, Count(want)) && !is_released(&w, Count(want.wrapping_add(1))));
        }
    }

    /// Threads as ranks: none leaves barrier k before all entered it.
    /// `lazy`: leaders look only when they arrive and then wait for the
    /// input, and the ranks that lead nobody help at every other look.
    fn threads_through(tree: Tree, rounds: usize, lazy: bool) {
        /// Raises `failed` if its thread panics, so that the others stop
        /// waiting for it (a broken barrier fails the test, not hangs it).
        struct Failing<'a>(&'a AtomicBool);
        impl Drop for Failing<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
        }
        let n = tree.ranks();
        let shared = Arc::new((tree, Mem::new(n), AtomicUsize::new(0), AtomicBool::new(false)));
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let sh = shared.clone();
                std::thread::spawn(move || {
                    let (t, m, entered, failed) = &*sh;
                    let _guard = Failing(failed);
                    let w = m.wires();
                    let since = std::time::Instant::now();
                    for k in 1..=rounds {
                        entered.fetch_add(1, Ordering::SeqCst);
                        let (target, mut p) = arrive(t, &w, r);
                        let mut looks = 0;
                        while !matches!(p, Progress::Released | Progress::Fired) {
                            if failed.load(Ordering::SeqCst) {
                                return;
                            }
                            assert!(since.elapsed().as_secs() < 120, "rank {r} stuck in barrier {k}");
                            std::thread::yield_now();
                            looks += 1;
                            p = match (lazy, t.leads(r)) {
                                (false, _) => poll(t, &w, r, target),
                                (true, true) if is_released(&w, target) => Progress::Released,
                                (true, true) => Progress::Waiting,
                                (true, false) if looks % 2 == 0 => help(t, &w, target),
                                (true, false) => poll(t, &w, r, target),
                            };
                        }
                        assert!(entered.load(Ordering::SeqCst) >= k * n, "rank {r} left barrier {k} early");
                    }
                })
            })
            .collect();
        let results: Vec<_> = hs.into_iter().map(|h| h.join()).collect();
        assert!(results.iter().all(|r| r.is_ok()), "a rank failed");
    }

    #[test]
    fn threads_never_leave_early() {
        for lazy in [false, true] {
            for (t, rounds) in
                [(Tree::new(2), 3000), (Tree::new(5), 2000), (Tree::with_width(7, 2), 1000), (Tree::new(40), 200)]
            {
                threads_through(t, rounds, lazy);
            }
            let paths: Vec<[Option<u32>; 2]> = (0..12u32).map(|r| [Some(r % 2), Some(r % 4)]).collect();
            threads_through(Tree::grouped(&paths), 500, lazy);
        }
    }
}
