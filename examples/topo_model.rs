//! A cost model of node-local barriers on a many-core node, from published
//! core-to-core cache-line latencies. Pure arithmetic, no MPI: it predicts
//! how long each barrier shape takes from the last arrival to the last
//! exit, on a 2-socket EPYC Milan-like node (2 × 12 CCX × 8 cores) and on a
//! 2-socket Ice Lake-like node (2 × 1 L3 × 32 cores), with ranks placed
//! compactly (rank r on core r) or round-robin over the sockets.
//!
//! Cost rules (docs/many-core.md says the same):
//! 1. A cache-line transfer costs `lat(a, b)`: 0 on the same core, `t_dom`
//!    inside one L3 domain, `t_sock` across domains of one socket, `t_x`
//!    across sockets (one-way, the published ping-pong round trip / 2).
//! 2. Atomic RMWs on one line are served one at a time, first come first
//!    served by request time (ties: a fixed shuffled order, or rank order);
//!    each costs one transfer from the line's previous writer. The RMWs of
//!    one rank are serial (x86 locked instructions).
//! 3. A store is posted: the writer does not wait for it; a rank reading
//!    the line sees it one transfer after the store (or one transfer after
//!    it starts reading, if the store was earlier). Consecutive stores of
//!    one rank are `issue` ns apart.
//! 4. Polling k lines written by k members: sequential bound = one transfer
//!    per line, one after the other (a spin-until-set loop per member);
//!    overlapped bound = the latest line's arrival + `issue` per other line,
//!    and, with at most `mlp` misses in flight (`--mlp`; unlimited by
//!    default), one more transfer per further `mlp` of the lines that became
//!    visible within one transfer of the latest (earlier ones were fetched
//!    by earlier polls and hit).
//! 5. A line spun on by ranks in D distinct L3 domains: each spinner sees a
//!    store one transfer from the writer plus `delta` × (D − 1).
//! 6. Local hits, instruction costs, MPI's call path and progress polls are
//!    not counted; spinners reading a line do not slow an RMW chain on it.
//!
//! Cases: "simultaneous" (all ranks arrive at once; latency = last exit −
//! arrival), "late" (all but one arrived long before; latency = last exit −
//! the late arrival, worst over which rank is late). Each case runs after
//! one warm-up barrier, so lines start where the previous barrier left
//! them. "loop" (for the 2-rank check): each rank re-enters as it exits,
//! period per barrier as a tight benchmark loop measures it.
//!
//! Usage: topo_model [--t-dom NS] [--t-sock NS] [--t-x NS] [--intel-dom NS]
//!        [--intel-x NS] [--delta NS] [--delta-alt NS] [--issue NS] [--floor NS]
//!        [--mlp N] [--mlp-alt N]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mca_coll_hwbarr::core::polled;

/// Published one-way line transfers, ns (EPYC Milan; Ice Lake).
const MILAN: [f64; 3] = [23.0, 107.0, 197.0];
const ICE_LAKE: [f64; 2] = [51.0, 108.0];
/// Per extra L3 domain spinning on one line (rule 5), base and alternative.
const DELTA: f64 = 5.0;
const DELTA_ALT: f64 = 10.0;
/// Per extra line polled (overlapped bound) and between consecutive stores.
const ISSUE: f64 = 2.0;
/// Misses in flight per core for the sensitivity column (rule 4): about the
/// L1 miss buffers of the cores modelled (Zen 3, Sunny Cove: 12-24), fewer
/// for misses that another core's cache must answer.
const MLP_ALT: usize = 8;
/// One-way line transfer measured on this project's 2-core machine.
const FLOOR_2CORE: f64 = 55.0;
/// Ranks to model (those above a machine's core count are skipped).
const RANKS: [usize; 6] = [4, 8, 16, 64, 128, 192];
/// Fan-out of MPICH's release_gather tree (flat up to 64 ranks).
const MPICH_K: usize = 64;
/// Wires per toggle bank word (src/core/toggle.rs).
const BANK_WIRES: usize = 64;
/// Polled group widths weighed against each other ("Group width"): the
/// component's (`polled::MAX_FAN_IN`) in the middle.
const WIDTHS: [usize; 3] = [8, 16, 32];
/// Misses in flight for that comparison (usize::MAX: unlimited).
const MLPS: [usize; 4] = [usize::MAX, 16, 12, 8];

#[derive(Clone, Copy, Debug)]
struct Machine {
    name: &'static str,
    sockets: usize,
    /// L3 domains per socket.
    domains: usize,
    /// Cores per L3 domain.
    cores: usize,
    t_dom: f64,
    t_sock: f64,
    t_x: f64,
}

impl Machine {
    fn total(&self) -> usize {
        self.sockets * self.domains * self.cores
    }
    fn domain(&self, core: usize) -> usize {
        core / self.cores
    }
    fn socket(&self, core: usize) -> usize {
        core / (self.cores * self.domains)
    }
    /// Rule 1: one-way transfer between two cores.
    fn lat(&self, a: usize, b: usize) -> f64 {
        if a == b {
            0.0
        } else if self.domain(a) == self.domain(b) {
            self.t_dom
        } else if self.socket(a) == self.socket(b) {
            self.t_sock
        } else {
            self.t_x
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Rank r on core r.
    Compact,
    /// Rank r on socket r mod S, filling each socket's cores in order.
    RoundRobin,
}

fn place(m: &Machine, p: Placement, n: usize) -> Vec<usize> {
    assert!(n <= m.total(), "more ranks than cores");
    let per = m.cores * m.domains;
    (0..n)
        .map(|r| match p {
            Placement::Compact => r,
            Placement::RoundRobin => (r % m.sockets) * per + r / m.sockets,
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ties {
    /// Simultaneous RMW requests served in a fixed pseudo-random order.
    Shuffled,
    /// ... in rank order (locality-friendly under compact placement).
    RankOrder,
}

#[derive(Clone, Copy, Debug)]
struct Costs {
    delta: f64,
    issue: f64,
    ties: Ties,
    /// Misses in flight per core (rule 4); usize::MAX: unlimited.
    mlp: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Poll {
    Sequential,
    Overlapped,
}

/// One machine, one placement, one set of costs, n ranks.
struct Ctx {
    m: Machine,
    cores: Vec<usize>,
    c: Costs,
    /// Tie-break key per rank (rule 2).
    key: Vec<usize>,
}

impl Ctx {
    fn new(m: Machine, p: Placement, n: usize, c: Costs) -> Ctx {
        let mut key: Vec<usize> = (0..n).collect();
        if c.ties == Ties::Shuffled {
            // Fisher-Yates with a fixed linear congruential generator.
            let mut s: u64 = 0x2545_f491_4f6c_dd1d;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                key.swap(i, (s >> 33) as usize % (i + 1));
            }
        }
        Ctx { m, cores: place(&m, p, n), c, key }
    }
    fn n(&self) -> usize {
        self.cores.len()
    }
    /// Group ids per tree level: ranks, banks and L3 domains are all below it.
    fn stride(&self) -> usize {
        self.m.total().max(self.n())
    }
    /// Transfer between the cores of ranks a and b.
    fn lat(&self, a: usize, b: usize) -> f64 {
        self.m.lat(self.cores[a], self.cores[b])
    }
    fn domains(&self, ranks: impl Iterator<Item = usize>) -> usize {
        let mut d: Vec<usize> = ranks.map(|r| self.m.domain(self.cores[r])).collect();
        d.sort_unstable();
        d.dedup();
        d.len()
    }
    /// Rule 4: leader starting at `start` polls `items` (writer, store time).
    fn poll(&self, leader: usize, start: f64, items: &[(usize, f64)], mode: Poll) -> f64 {
        match mode {
            Poll::Sequential => items.iter().fold(start, |t, &(p, w)| t.max(w) + self.lat(p, leader)),
            Poll::Overlapped => {
                let seen: Vec<(f64, f64)> =
                    items.iter().map(|&(p, w)| (start.max(w) + self.lat(p, leader), self.lat(p, leader))).collect();
                let last = seen.iter().map(|s| s.0).fold(start, f64::max);
                // The final polls' misses: lines visible within one transfer
                // of the last, fetched `mlp` at a time.
                let window = seen.iter().map(|s| s.1).fold(0.0, f64::max);
                let fresh: Vec<f64> = seen.iter().filter(|s| s.0 > last - window).map(|s| s.1).collect();
                let rounds = fresh.len().div_ceil(self.c.mlp).max(1);
                let slowest = fresh.iter().copied().fold(0.0, f64::max);
                last + self.c.issue * items.len().saturating_sub(1) as f64 + slowest * (rounds - 1) as f64
            }
        }
    }
    /// Rules 3 and 5: rank `w` stores at `t` a line that `spinners` (rank,
    /// start of spinning) wait on; sets their exit times.
    fn release(&self, w: usize, t: f64, spinners: &[(usize, f64)], exits: &mut [f64]) {
        let d = self.domains(spinners.iter().map(|s| s.0));
        let extra = self.c.delta * d.saturating_sub(1) as f64;
        for &(s, start) in spinners {
            exits[s] = start.max(t) + self.lat(w, s) + extra;
        }
    }
}

/// A line updated by atomic RMWs: who wrote it last, when it is free.
#[derive(Clone, Copy, Debug)]
struct Counter {
    owner: usize,
    ready: f64,
}

impl Default for Counter {
    fn default() -> Counter {
        Counter { owner: 0, ready: 0.0 }
    }
}

/// Rule 2: serves RMW requests (time, rank) on one line, first come first
/// served. Returns each request's completion (in input order) and the
/// index of the request served last.
fn chain(ctx: &Ctx, line: &mut Counter, reqs: &[(f64, usize)]) -> (Vec<f64>, usize) {
    let mut order: Vec<usize> = (0..reqs.len()).collect();
    order.sort_by(|&a, &b| reqs[a].0.total_cmp(&reqs[b].0).then(ctx.key[reqs[a].1].cmp(&ctx.key[reqs[b].1])));
    let mut done = vec![0.0; reqs.len()];
    for &i in &order {
        let (t, r) = reqs[i];
        let start = t.max(line.ready);
        line.ready = start + ctx.lat(line.owner, r);
        line.owner = r;
        done[i] = line.ready;
    }
    (done, *order.last().expect("a chain needs a request"))
}

/// Who waits where after the arrival phase, and who writes which release
/// lines (group ids are indices into the shape's release lines).
struct Arrival {
    /// Per rank: the group whose release line it spins on, and since when.
    spin: Vec<Option<(usize, f64)>>,
    /// Per rank: the groups whose release lines it writes once released, in order.
    writes: Vec<Vec<usize>>,
    /// The rank that completes the arrival, and when.
    top: (usize, f64),
}

/// Per-group release (rules 3, 5): from the top, each released rank
/// stores the lines it owes; their spinners are released in turn. Lines
/// nobody spins on are not written.
fn release_groups(ctx: &Ctx, a: &Arrival, groups: usize) -> Vec<f64> {
    let n = ctx.n();
    let mut spinners: Vec<Vec<(usize, f64)>> = vec![Vec::new(); groups];
    for (r, s) in a.spin.iter().enumerate() {
        if let Some((g, t)) = *s {
            spinners[g].push((r, t));
        }
    }
    let mut exits = vec![f64::NAN; n];
    exits[a.top.0] = a.top.1;
    let mut work = vec![a.top.0];
    while let Some(x) = work.pop() {
        let mut t = exits[x];
        let mut first = true;
        for &g in &a.writes[x] {
            if spinners[g].is_empty() {
                continue;
            }
            if !first {
                t += ctx.c.issue;
            }
            first = false;
            ctx.release(x, t, &spinners[g], &mut exits);
            work.extend(spinners[g].iter().map(|s| s.0));
        }
        exits[x] = t;
    }
    assert!(exits.iter().all(|e| e.is_finite()), "a rank was never released");
    exits
}

/// One line written by the top, spun on by everyone else.
fn release_flat(ctx: &Ctx, a: &Arrival) -> Vec<f64> {
    let mut exits = vec![f64::NAN; ctx.n()];
    let spinners: Vec<(usize, f64)> = a.spin.iter().enumerate().filter_map(|(r, s)| s.map(|(_, t)| (r, t))).collect();
    exits[a.top.0] = a.top.1;
    ctx.release(a.top.0, a.top.1, &spinners, &mut exits);
    exits
}

/// Arrival through a tree of RMW counters: `levels[l][r]` is rank r's group
/// at level l (coarser and coarser, one group at the top). At each level
/// the rank whose RMW is served last in its group climbs to the next.
fn climb(ctx: &Ctx, lines: &mut [Vec<Counter>], levels: &[Vec<usize>], arrive: &[f64]) -> Arrival {
    let n = ctx.n();
    let stride = ctx.stride();
    let mut spin = vec![None; n];
    let mut writes: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut climbers: Vec<(f64, usize)> = (0..n).map(|r| (arrive[r], r)).collect();
    for (l, level) in levels.iter().enumerate() {
        let mut next = Vec::new();
        let mut groups: Vec<usize> = climbers.iter().map(|&(_, r)| level[r]).collect();
        groups.sort_unstable();
        groups.dedup();
        for g in groups {
            let reqs: Vec<(f64, usize)> = climbers.iter().copied().filter(|&(_, r)| level[r] == g).collect();
            if reqs.len() == 1 {
                // A group of one member has no line: its rank climbs at once.
                next.push(reqs[0]);
                continue;
            }
            let (done, last) = chain(ctx, &mut lines[l][g], &reqs);
            for (i, &(_, r)) in reqs.iter().enumerate() {
                if i == last {
                    writes[r].insert(0, l * stride + g); // retrace: highest first
                    next.push((done[i], r));
                } else {
                    spin[r] = Some((l * stride + g, done[i]));
                }
            }
        }
        climbers = next;
    }
    assert_eq!(climbers.len(), 1, "the top level must be one group");
    let (t, top) = climbers[0];
    Arrival { spin, writes, top: (top, t) }
}

/// Arrival by polling (xhc, acoll, MPICH): `groups` (leader, members), each
/// listed after the groups its members lead. Members store their flag when
/// ready; the leader polls them, and is then ready itself.
fn gather(ctx: &Ctx, groups: &[(usize, Vec<usize>)], arrive: &[f64], mode: Poll) -> Arrival {
    let n = ctx.n();
    let mut ready = arrive.to_vec();
    let mut spin = vec![None; n];
    let mut writes: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (g, (leader, members)) in groups.iter().enumerate() {
        let items: Vec<(usize, f64)> = members.iter().map(|&m| (m, ready[m])).collect();
        for &m in members {
            spin[m] = Some((g, ready[m]));
        }
        ready[*leader] = ctx.poll(*leader, ready[*leader], &items, mode);
        writes[*leader].push(g); // xhc writes its acks bottom-up
    }
    let top = groups.last().expect("a group").0;
    Arrival { spin, writes, top: (top, ready[top]) }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// a. One shared counter line, one release line.
    Flat,
    /// b. hwbarr counter today: each rank's own counter, n−1 remote RMWs per rank.
    Counter,
    /// c. hwbarr toggle today: banks of 64 wires (RMW), one input line for all.
    Toggle,
    /// d. xhc: NUMA/socket groups polled by a leader, per-group acks.
    Xhc(Poll),
    /// e. acoll: NUMA leaders then rank 0, polled; one release word.
    Acoll(Poll),
    /// f. MPICH release_gather: 64-ary tree, gather by polling, release down.
    Mpich(Poll),
    /// g. hwbarr tree: RMW counters L3 → socket → machine, per-group release.
    Tree,
    /// g'. The same arrival, one machine-wide release line.
    TreeFlat,
    /// h. hwbarr polled (`src/core/polled.rs`, its tree as the component
    /// builds it): each rank's wire on its own line, polled by its L3
    /// domain's leader (overlapped loads); the domain leaders polled by
    /// rank 0, or by package first if they are more than a group holds;
    /// one machine-wide release line.
    Polled,
    /// h'. hwbarr's polled tree (`polled::Tree::grouped_by`) with groups
    /// of at most this many ranks (`Polled` is the component's width,
    /// `polled::MAX_FAN_IN`).
    PolledW(usize),
}

impl Kind {
    const ALL: [Kind; 14] = [
        Kind::Flat,
        Kind::Counter,
        Kind::Toggle,
        Kind::Xhc(Poll::Sequential),
        Kind::Xhc(Poll::Overlapped),
        Kind::Acoll(Poll::Sequential),
        Kind::Acoll(Poll::Overlapped),
        Kind::Mpich(Poll::Sequential),
        Kind::Mpich(Poll::Overlapped),
        Kind::Tree,
        Kind::TreeFlat,
        Kind::Polled,
        Kind::PolledW(WIDTHS[0]),
        Kind::PolledW(WIDTHS[2]),
    ];
    fn name(self) -> &'static str {
        match self {
            Kind::Flat => "flat",
            Kind::Counter => "counter",
            Kind::Toggle => "toggle",
            Kind::Xhc(Poll::Sequential) => "xhc seq",
            Kind::Xhc(Poll::Overlapped) => "xhc ovl",
            Kind::Acoll(Poll::Sequential) => "acoll seq",
            Kind::Acoll(Poll::Overlapped) => "acoll ovl",
            Kind::Mpich(Poll::Sequential) => "MPICH seq",
            Kind::Mpich(Poll::Overlapped) => "MPICH ovl",
            Kind::Tree => "tree",
            Kind::TreeFlat => "tree+flat rel",
            Kind::Polled => "polled",
            Kind::PolledW(8) => "polled w8",
            Kind::PolledW(32) => "polled w32",
            Kind::PolledW(_) => "polled w?",
        }
    }
    /// The topology-aware designs (the tree, and hwbarr's toggle tree and
    /// polled barrier), set beside "best other" in the tables.
    fn is_tree(self) -> bool {
        matches!(self, Kind::Tree | Kind::TreeFlat | Kind::Polled | Kind::PolledW(_))
    }
}

/// A barrier shape with the state of its RMW lines across barriers.
struct Shape {
    kind: Kind,
    /// RMW counter lines per level (Flat, Toggle, Tree) or per rank (Counter, level 0).
    lines: Vec<Vec<Counter>>,
}

impl Shape {
    fn new(kind: Kind, ctx: &Ctx) -> Shape {
        Shape { kind, lines: vec![vec![Counter::default(); ctx.stride()]; 8] }
    }

    /// Group of each rank at each level of a counter tree.
    fn levels(&self, ctx: &Ctx) -> Vec<Vec<usize>> {
        let n = ctx.n();
        match self.kind {
            Kind::Flat => vec![vec![0; n]],
            Kind::Toggle => {
                // src/core/toggle.rs: banks of 64 wires by rank index, a
                // completed bank toggles its wire one level up.
                let mut levels = Vec::new();
                let mut width = BANK_WIRES;
                loop {
                    levels.push((0..n).map(|r| r / width).collect::<Vec<_>>());
                    if n <= width {
                        return levels;
                    }
                    width *= BANK_WIRES;
                }
            }
            Kind::Tree | Kind::TreeFlat => {
                let dom = (0..n).map(|r| ctx.m.domain(ctx.cores[r])).collect();
                let sock = (0..n).map(|r| ctx.m.socket(ctx.cores[r])).collect();
                vec![dom, sock, vec![0; n]]
            }
            _ => unreachable!(),
        }
    }

    /// Exit time of every rank for one barrier entered at `arrive`.
    fn barrier(&mut self, ctx: &Ctx, arrive: &[f64]) -> Vec<f64> {
        let n = ctx.n();
        match self.kind {
            Kind::Flat | Kind::Toggle | Kind::TreeFlat => {
                let levels = self.levels(ctx);
                let a = climb(ctx, &mut self.lines, &levels, arrive);
                release_flat(ctx, &a)
            }
            Kind::Tree => {
                let levels = self.levels(ctx);
                let a = climb(ctx, &mut self.lines, &levels, arrive);
                release_groups(ctx, &a, levels.len() * ctx.stride())
            }
            Kind::Counter => self.counter(ctx, arrive),
            Kind::Xhc(mode) => {
                let groups = socket_groups(ctx);
                let a = gather(ctx, &groups, arrive, mode);
                release_groups(ctx, &a, groups.len())
            }
            Kind::Acoll(mode) => {
                let groups = socket_groups(ctx);
                let a = gather(ctx, &groups, arrive, mode);
                release_flat(ctx, &a)
            }
            Kind::Polled | Kind::PolledW(_) => {
                let width = if let Kind::PolledW(w) = self.kind { w } else { polled::MAX_FAN_IN };
                let a = gather(ctx, &tree_groups(ctx, width), arrive, Poll::Overlapped);
                release_flat(ctx, &a)
            }
            Kind::Mpich(mode) => {
                let groups = kary_groups(n, MPICH_K);
                let a = gather(ctx, &groups, arrive, mode);
                release_groups(ctx, &a, groups.len())
            }
        }
    }

    /// src/core/counter.rs: `arrive` charges the own counter, then sends one
    /// RMW "packet" to each peer (rank+1, rank+2, …), then the rank spins
    /// on its own counter until every packet landed.
    fn counter(&mut self, ctx: &Ctx, arrive: &[f64]) -> Vec<f64> {
        let n = ctx.n();
        let lines = &mut self.lines[0];
        let mut heap: BinaryHeap<_> =
            arrive.iter().enumerate().map(|(r, t)| Reverse((t.to_bits(), ctx.key[r], r, 0usize))).collect();
        let mut sent = vec![0.0; n];
        let mut last = vec![(0.0f64, 0usize); n];
        while let Some(Reverse((t, _, r, i))) = heap.pop() {
            let q = (r + i) % n;
            let line = &mut lines[q];
            let start = f64::from_bits(t).max(line.ready);
            line.ready = start + ctx.lat(line.owner, r);
            line.owner = r;
            last[q] = (line.ready, r);
            if i + 1 < n {
                heap.push(Reverse((line.ready.to_bits(), ctx.key[r], r, i + 1)));
            } else {
                sent[r] = line.ready;
            }
        }
        (0..n).map(|q| sent[q].max(last[q].0 + ctx.lat(last[q].1, q))).collect()
    }
}

/// xhc (NUMA, then socket; one NUMA node per socket here) and acoll (NUMA
/// leaders, then rank 0): one group per socket led by its lowest rank,
/// then the socket leaders led by rank 0.
fn socket_groups(ctx: &Ctx) -> Vec<(usize, Vec<usize>)> {
    let mut by_socket: Vec<Vec<usize>> = vec![Vec::new(); ctx.m.sockets];
    for r in 0..ctx.n() {
        by_socket[ctx.m.socket(ctx.cores[r])].push(r);
    }
    let mut groups: Vec<(usize, Vec<usize>)> =
        by_socket.into_iter().filter(|s| !s.is_empty()).map(|s| (s[0], s[1..].to_vec())).collect();
    if groups.len() > 1 {
        let leaders: Vec<usize> = groups.iter().map(|g| g.0).filter(|&l| l != 0).collect();
        groups.push((0, leaders));
    }
    groups
}

/// hwbarr's polled tree as the component builds it from the ranks' places
/// (`polled::Tree::grouped_by`, groups of at most `width`): each leader
/// polls all the ranks it reads at once, after the leaders among them.
fn tree_groups(ctx: &Ctx, width: usize) -> Vec<(usize, Vec<usize>)> {
    let paths: Vec<[Option<u32>; 2]> = (0..ctx.n())
        .map(|r| [Some(ctx.m.socket(ctx.cores[r]) as u32), Some(ctx.m.domain(ctx.cores[r]) as u32)])
        .collect();
    let t = polled::Tree::grouped_by(&paths, width);
    fn height(t: &polled::Tree, r: usize) -> usize {
        t.children(r).iter().map(|&c| 1 + height(t, c as usize)).max().unwrap_or(0)
    }
    let mut groups: Vec<(usize, Vec<usize>)> = (0..ctx.n())
        .filter(|&r| !t.children(r).is_empty())
        .map(|r| (r, t.children(r).iter().map(|&c| c as usize).collect()))
        .collect();
    groups.sort_by_key(|g| (height(&t, g.0), g.0));
    groups
}

/// MPICH's k-ary tree: the children of i are k·i+1 … k·i+k; deepest first.
fn kary_groups(n: usize, k: usize) -> Vec<(usize, Vec<usize>)> {
    (0..n)
        .rev()
        .map(|i| (i, (k * i + 1..(k * i + k + 1).min(n)).collect::<Vec<_>>()))
        .filter(|g| !g.1.is_empty())
        .collect()
}

const T0: f64 = 1e6;
const LATE: f64 = 1e6;

/// Simultaneous arrival: last exit − arrival, after one warm-up barrier.
fn simultaneous(ctx: &Ctx, kind: Kind) -> f64 {
    let n = ctx.n();
    let mut s = Shape::new(kind, ctx);
    s.barrier(ctx, &vec![0.0; n]);
    let exits = s.barrier(ctx, &vec![T0; n]);
    exits.iter().fold(0.0f64, |a, &b| a.max(b)) - T0
}

/// Rank `late` arrives long after the others: last exit − its arrival.
fn late_by(ctx: &Ctx, kind: Kind, late: usize) -> f64 {
    let n = ctx.n();
    let mut s = Shape::new(kind, ctx);
    s.barrier(ctx, &vec![0.0; n]);
    let mut arrive = vec![T0; n];
    arrive[late] = T0 + LATE;
    let exits = s.barrier(ctx, &arrive);
    exits.iter().fold(0.0f64, |a, &b| a.max(b)) - (T0 + LATE)
}

/// Worst over the late rank (every leader, of xhc and of the polled trees,
/// every 5th rank, the last).
fn late(ctx: &Ctx, kind: Kind) -> f64 {
    let n = ctx.n();
    let mut leaders: Vec<usize> = socket_groups(ctx).iter().map(|g| g.0).collect();
    leaders.extend(WIDTHS.iter().flat_map(|&w| tree_groups(ctx, w)).map(|g| g.0));
    (0..n)
        .filter(|&r| r < 3 || r % 5 == 0 || r == n - 1 || leaders.contains(&r))
        .map(|r| late_by(ctx, kind, r))
        .fold(0.0, f64::max)
}

/// Tight loop: every rank re-enters the moment it exits; mean period.
fn loop_period(ctx: &Ctx, kind: Kind) -> f64 {
    let n = ctx.n();
    let mut s = Shape::new(kind, ctx);
    let mut arrive = vec![0.0; n];
    let mut ends = Vec::new();
    for _ in 0..40 {
        arrive = s.barrier(ctx, &arrive);
        ends.push(arrive.iter().fold(0.0f64, |a, &b| a.max(b)));
    }
    (ends[39] - ends[19]) / 20.0
}

fn fmt_ns(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

/// Best of the peers and of today's hwbarr shapes (overlapped polls count,
/// the optimistic bound for the peers).
fn best_other(row: &[(Kind, f64)]) -> (Kind, f64) {
    row.iter()
        .copied()
        .filter(|(k, _)| !k.is_tree())
        .fold((Kind::Flat, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a })
}

/// Best of xhc, acoll and MPICH alone (either bound).
fn best_peer(row: &[(Kind, f64)]) -> f64 {
    row.iter()
        .filter(|(k, _)| matches!(k, Kind::Xhc(_) | Kind::Acoll(_) | Kind::Mpich(_)))
        .map(|r| r.1)
        .fold(f64::INFINITY, f64::min)
}

fn row_of(ctx: &Ctx, case: fn(&Ctx, Kind) -> f64) -> Vec<(Kind, f64)> {
    Kind::ALL.iter().map(|&k| (k, case(ctx, k))).collect()
}

fn ratio(row: &[(Kind, f64)], kind: Kind) -> f64 {
    row.iter().find(|r| r.0 == kind).expect("kind").1 / best_other(row).1
}

fn table(m: Machine, p: Placement, c: Costs, case_name: &str, case: fn(&Ctx, Kind) -> f64) {
    println!("\n{} — {p:?} placement — {case_name} (ns, last arrival → last exit)\n", m.name);
    let head: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    println!(
        "| ranks | {} | best other | tree / best | tree+flat / best | polled / best | polled / best peer |",
        head.join(" | ")
    );
    println!("|---{}|---|---|---|---|---|", "|---".repeat(head.len()));
    for n in RANKS.into_iter().filter(|&n| n <= m.total()) {
        let ctx = Ctx::new(m, p, n, c);
        let row = row_of(&ctx, case);
        let cells: Vec<String> = row.iter().map(|r| fmt_ns(r.1)).collect();
        let (bk, _) = best_other(&row);
        let polled = row.iter().find(|r| r.0 == Kind::Polled).expect("polled").1;
        println!(
            "| {n} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            cells.join(" | "),
            bk.name(),
            ratio(&row, Kind::Tree),
            ratio(&row, Kind::TreeFlat),
            ratio(&row, Kind::Polled),
            polled / best_peer(&row)
        );
    }
}

/// Misses in flight as the tables name them.
fn misses_name(mlp: usize) -> String {
    if mlp == usize::MAX {
        "unlimited".to_string()
    } else {
        mlp.to_string()
    }
}

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name} wants a number of ns, got {v}")))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let milan = Machine {
        name: "EPYC Milan-like, 2 sockets × 12 CCX × 8 cores",
        sockets: 2,
        domains: 12,
        cores: 8,
        t_dom: arg(&args, "--t-dom", MILAN[0]),
        t_sock: arg(&args, "--t-sock", MILAN[1]),
        t_x: arg(&args, "--t-x", MILAN[2]),
    };
    let intel_dom = arg(&args, "--intel-dom", ICE_LAKE[0]);
    let intel = Machine {
        name: "Ice Lake-like, 2 sockets × 1 L3 × 32 cores",
        sockets: 2,
        domains: 1,
        cores: 32,
        t_dom: intel_dom,
        t_sock: intel_dom,
        t_x: arg(&args, "--intel-x", ICE_LAKE[1]),
    };
    let mlp = match arg(&args, "--mlp", 0.0) {
        m if m >= 1.0 => m as usize,
        _ => usize::MAX,
    };
    let base =
        Costs { delta: arg(&args, "--delta", DELTA), issue: arg(&args, "--issue", ISSUE), ties: Ties::Shuffled, mlp };
    let delta_alt = arg(&args, "--delta-alt", DELTA_ALT);
    let mlp_alt = arg(&args, "--mlp-alt", MLP_ALT as f64).max(1.0) as usize;
    let misses = misses_name(mlp);
    println!(
        "Milan: t_dom {} t_sock {} t_x {} ns; Ice Lake: t_dom {} t_x {} ns; delta {} ns per extra spinning L3 domain; issue {} ns; ties shuffled; misses in flight {misses}",
        milan.t_dom, milan.t_sock, milan.t_x, intel.t_dom, intel.t_x, base.delta, base.issue
    );
    for m in [milan, intel] {
        for p in [Placement::Compact, Placement::RoundRobin] {
            table(m, p, base, "simultaneous arrival", simultaneous);
            table(m, p, base, "one rank late (worst late rank)", late);
        }
    }

    println!(
        "\nSensitivity: tree / best other (tree+flat / best other) [polled / best other], base vs delta {delta_alt} ns vs ties in rank order vs {mlp_alt} misses in flight\n"
    );
    println!("| machine | placement | ranks | case | base | delta {delta_alt} | rank-order ties | mlp {mlp_alt} |");
    println!("|---|---|---|---|---|---|---|---|");
    let alts = [
        base,
        Costs { delta: delta_alt, ..base },
        Costs { ties: Ties::RankOrder, ..base },
        Costs { mlp: mlp_alt, ..base },
    ];
    for m in [milan, intel] {
        for p in [Placement::Compact, Placement::RoundRobin] {
            for n in RANKS.into_iter().filter(|&n| n <= m.total()) {
                for (name, case) in [("simultaneous", simultaneous as fn(&Ctx, Kind) -> f64), ("late", late)] {
                    let cells: Vec<String> = alts
                        .iter()
                        .map(|&c| {
                            let row = row_of(&Ctx::new(m, p, n, c), case);
                            format!(
                                "{:.2} ({:.2}) [{:.2}]",
                                ratio(&row, Kind::Tree),
                                ratio(&row, Kind::TreeFlat),
                                ratio(&row, Kind::Polled)
                            )
                        })
                        .collect();
                    println!(
                        "| {} | {p:?} | {n} | {name} | {} |",
                        m.name.split(',').next().unwrap(),
                        cells.join(" | ")
                    );
                }
            }
        }
    }

    // Group width: the polled tree at each width, against the best of the
    // widths in the same row, for each number of misses in flight.
    println!("\nGroup width: polled tree at width w8 / w16 / w32, each against the best of the three in its row\n");
    println!("| misses in flight | worst w8 | worst w16 | worst w32 | rows |");
    println!("|---|---|---|---|---|");
    for mlp in MLPS {
        let mut worst = [1.0f64; 3];
        let mut rows = 0;
        for m in [milan, intel] {
            for p in [Placement::Compact, Placement::RoundRobin] {
                for n in RANKS.into_iter().filter(|&n| n >= 16 && n <= m.total()) {
                    for case in [simultaneous as fn(&Ctx, Kind) -> f64, late] {
                        let ctx = Ctx::new(m, p, n, Costs { mlp, ..base });
                        let t: Vec<f64> = WIDTHS.iter().map(|&w| case(&ctx, Kind::PolledW(w))).collect();
                        let best = t.iter().copied().fold(f64::INFINITY, f64::min);
                        for (x, v) in worst.iter_mut().zip(&t) {
                            *x = x.max(v / best);
                        }
                        rows += 1;
                    }
                }
            }
        }
        println!("| {} | {:.2} | {:.2} | {:.2} | {rows} |", misses_name(mlp), worst[0], worst[1], worst[2]);
    }

    let floor = arg(&args, "--floor", FLOOR_2CORE);
    let two = Machine {
        name: "this machine: 2 cores, one L3",
        sockets: 1,
        domains: 1,
        cores: 2,
        t_dom: floor,
        t_sock: floor,
        t_x: floor,
    };
    println!("\nTwo ranks on {} ({floor} ns one-way transfer), ns\n", two.name);
    println!("| shape | simultaneous | one late | tight loop period |");
    println!("|---|---|---|---|");
    let ctx = Ctx::new(two, Placement::Compact, 2, base);
    for k in Kind::ALL {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} |",
            k.name(),
            simultaneous(&ctx, k),
            late(&ctx, k),
            loop_period(&ctx, k)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXACT: Costs = Costs { delta: 5.0, issue: 2.0, ties: Ties::RankOrder, mlp: usize::MAX };

    fn milan() -> Machine {
        Machine { name: "milan", sockets: 2, domains: 12, cores: 8, t_dom: 23.0, t_sock: 107.0, t_x: 197.0 }
    }

    #[test]
    fn latencies_and_placements() {
        let m = milan();
        assert_eq!((m.lat(0, 0), m.lat(0, 7), m.lat(0, 8), m.lat(95, 96)), (0.0, 23.0, 107.0, 197.0));
        assert_eq!(place(&m, Placement::RoundRobin, 4), vec![0, 96, 1, 97]);
        assert_eq!(place(&m, Placement::Compact, 3), vec![0, 1, 2]);
    }

    /// 2 ranks in one CCX, one counter line: by hand, after the warm-up
    /// rank 1 owns the line. Rank 0 fetches it (23), rank 1 takes it back
    /// (23) and stores the release, rank 0 sees it (23): 69. Late: one
    /// RMW from the other rank's cache and one release, 46.
    #[test]
    fn flat_two_ranks_in_a_ccx() {
        let ctx = Ctx::new(milan(), Placement::Compact, 2, EXACT);
        assert_eq!(simultaneous(&ctx, Kind::Flat), 69.0);
        assert_eq!(late_by(&ctx, Kind::Flat, 0), 46.0);
        assert_eq!(late_by(&ctx, Kind::Flat, 1), 46.0);
    }

    /// Blue Gene counter, 2 ranks in a CCX: rank 0 charges its counter
    /// (last decremented by rank 1: 23); rank 1's charge is local and its
    /// packet waits behind rank 0's charge (23 + 23); rank 0's packet to
    /// rank 1 leaves at 23 and lands at 46; each owner sees its counter
    /// reach 0 one transfer later: 69.
    #[test]
    fn counter_two_ranks_in_a_ccx() {
        let ctx = Ctx::new(milan(), Placement::Compact, 2, EXACT);
        assert_eq!(simultaneous(&ctx, Kind::Counter), 69.0);
    }

    /// 16 ranks = 2 CCXs of socket 0. Each CCX chain: 8 RMWs × 23 = 184
    /// (the line starts in rank 7's / 15's cache, the previous last). Rank
    /// 7 then rank 15 on the socket line, which rank 15 left last: 184 +
    /// 107 + 107 = 398; the machine level has one member (free). Rank 15
    /// stores the socket release at 398 and its CCX's at 400 (+23 → 423);
    /// rank 7 sees the socket line at 505 and stores its CCX's: 528.
    /// Flat release instead: 398 + 107 + 5 (two spinning domains) = 510.
    #[test]
    fn tree_sixteen_ranks_in_two_ccx() {
        let ctx = Ctx::new(milan(), Placement::Compact, 16, EXACT);
        assert_eq!(simultaneous(&ctx, Kind::Tree), 528.0);
        assert_eq!(simultaneous(&ctx, Kind::TreeFlat), 510.0);
        // Rank 3 late: 23 (CCX line) + 107 (socket line, left by rank 15)
        // + 0 (machine), then rank 15 sees the socket release: + 107 and
        // stores its CCX's (+ 23): 260.
        assert_eq!(late_by(&ctx, Kind::Tree, 3), 260.0);
    }

    /// Polled, 16 ranks in 2 CCXs, the component's tree: rank 8 reads its 7
    /// members (23 + 6 · 2 = 35); rank 0 reads its 7 and rank 8's line in
    /// one poll (35 + 107 + 7 · 2 = 156) and stores the release, seen
    /// across the socket by 2 domains: + 107 + 5 = 268. Rank 8 late: it
    /// reads its members' lines (35), then the same path; its member 9
    /// late: rank 8 sees it after 23 + 6 · 2, the same.
    #[test]
    fn polled_sixteen_ranks_in_two_ccx() {
        let ctx = Ctx::new(milan(), Placement::Compact, 16, EXACT);
        let mut root: Vec<usize> = (1..8).collect();
        root.push(8);
        assert_eq!(tree_groups(&ctx, polled::MAX_FAN_IN), vec![(8, (9..16).collect()), (0, root)]);
        assert_eq!(simultaneous(&ctx, Kind::Polled), 268.0);
        assert_eq!(late_by(&ctx, Kind::Polled, 8), 268.0);
        assert_eq!(late_by(&ctx, Kind::Polled, 9), 268.0);
    }

    /// With at most 4 misses in flight, a leader that reads 7 lines
    /// written at once fetches them in two rounds (one more transfer); a
    /// line written long before the others is no miss of the last round.
    #[test]
    fn misses_in_flight_bound_overlapped_polls() {
        let c = Costs { mlp: 4, ..EXACT };
        let ctx = Ctx::new(milan(), Placement::Compact, 8, c);
        let items: Vec<(usize, f64)> = (1..8).map(|r| (r, 0.0)).collect();
        assert_eq!(ctx.poll(0, 0.0, &items, Poll::Overlapped), 23.0 + 6.0 * 2.0 + 23.0);
        let mut late: Vec<(usize, f64)> = (1..8).map(|r| (r, 0.0)).collect();
        late[0].1 = 1000.0;
        assert_eq!(ctx.poll(0, 500.0, &late, Poll::Overlapped), 1000.0 + 23.0 + 12.0);
        let unlimited = Ctx::new(milan(), Placement::Compact, 8, EXACT);
        assert_eq!(unlimited.poll(0, 0.0, &items, Poll::Overlapped), 23.0 + 6.0 * 2.0);
    }

    /// Polling bounds: a leader reading two lines of its CCX written
    /// before it started: sequential 23 + 23, overlapped 23 + 2.
    #[test]
    fn poll_bounds() {
        let ctx = Ctx::new(milan(), Placement::Compact, 3, EXACT);
        let items = [(1, 0.0), (2, 0.0)];
        assert_eq!(ctx.poll(0, 10.0, &items, Poll::Sequential), 56.0);
        assert_eq!(ctx.poll(0, 10.0, &items, Poll::Overlapped), 35.0);
    }

    /// xhc, 16 ranks in one socket (one group led by rank 0), rank 0 late:
    /// it reads 15 lines written long before, 7 in its CCX and 8 in the
    /// other: sequential 7·23 + 8·107 = 1017, then one ack line spun on in
    /// 2 domains: + 107 + 5 = 1129.
    #[test]
    fn xhc_late_leader_reads_every_line() {
        let ctx = Ctx::new(milan(), Placement::Compact, 16, EXACT);
        assert_eq!(late_by(&ctx, Kind::Xhc(Poll::Sequential), 0), 1129.0);
        assert_eq!(late_by(&ctx, Kind::Xhc(Poll::Overlapped), 0), 107.0 + 14.0 * 2.0 + 107.0 + 5.0);
    }

    /// MPICH's tree: flat up to 65 ranks, then rank 1 leads 65..128.
    #[test]
    fn mpich_tree_shape() {
        assert_eq!(kary_groups(3, 64), vec![(0, vec![1, 2])]);
        let g = kary_groups(130, 64);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0], (2, vec![129]));
        assert_eq!(g[1].1.len(), 64);
        assert_eq!(g[2].0, 0);
    }

    /// Toggle levels follow src/core/toggle.rs: one bank up to 64 ranks.
    #[test]
    fn toggle_levels() {
        let ctx = Ctx::new(milan(), Placement::Compact, 130, EXACT);
        let s = Shape::new(Kind::Toggle, &ctx);
        let l = s.levels(&ctx);
        assert_eq!(l.len(), 2);
        assert_eq!((l[0][63], l[0][64], l[0][129], l[1][129]), (0, 1, 2, 0));
    }
}
