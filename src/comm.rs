//! One communicator's barrier state, apart from the Open MPI objects that
//! carry it (`ompi::server`): who shares a node, the device, the waiting
//! policy, and its route — the one barrier its ranks agreed on in the first
//! exchange (`exchange`), which `barrier` runs. Generic over the
//! point-to-point transport, so that unit tests run it in memory.

use std::ffi::c_int;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::barrier::inter::InterAlgorithm;
use crate::contention::CONTENTION;
use crate::exchange::lookout::{Lookout, Stall};
use crate::exchange::words::Settings;
use crate::exchange::Agreed;
use crate::layout::{Layout, NO_LEADER};
use crate::ompi::report::{self, Topic};
use crate::p2p::{self, P2p, ERROR};
use crate::pause;
use crate::settings::Algorithm;
use crate::shm::line_pick::{LineTrial, Trial};
use crate::shm::segment::Segment;
use crate::topology::{Place, Topology};
use crate::wait::{self, Crowd, PolicyFacts, WaitPolicy};

/// The barriers of the shared-memory device (`core`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    /// The TUC toggle-wire barrier.
    Toggle,
    /// The Blue Gene DMA-counter barrier.
    Counter,
    /// The toggle wires on one line, read by every rank.
    Line,
    /// The toggle wires on a line each, read by domain leaders.
    Polled,
}

impl Core {
    /// The device barrier of an agreed algorithm; None for `linear`.
    pub fn of(a: Algorithm) -> Option<Core> {
        match a {
            Algorithm::Toggle => Some(Core::Toggle),
            Algorithm::Counter => Some(Core::Counter),
            Algorithm::Line => Some(Core::Line),
            Algorithm::Polled => Some(Core::Polled),
            Algorithm::Linear | Algorithm::Auto => None,
        }
    }

    /// The device's tree for this core, for verbose output ("" for the
    /// flat cores).
    pub fn describe(self, seg: &Segment) -> String {
        match self {
            Core::Toggle => format!(", toggle banks per level {}", seg.shape().describe()),
            Core::Polled => format!(", polled groups per level {}", seg.tree().describe()),
            Core::Line => match seg.line_trial_slots() {
                Some(slots) => {
                    format!(", trying {slots} candidate lines over {} barriers after this one", LineTrial::barriers(slots))
                }
                None => String::new(),
            },
            Core::Counter => String::new(),
        }
    }

    pub fn algorithm(self) -> Algorithm {
        match self {
            Core::Toggle => Algorithm::Toggle,
            Core::Counter => Algorithm::Counter,
            Core::Line => Algorithm::Line,
            Core::Polled => Algorithm::Polled,
        }
    }
}

/// Which barrier a communicator runs, decided once, when its ranks agree
/// (`Comm::adopt_device`, `Comm::adopt_layout`), and the same on every
/// rank. `barrier` runs each route's blocking and non-blocking forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// One node: the shared-memory device.
    Device(Core),
    /// Spanning nodes: each node's ranks meet (on the node's device, with
    /// this core, when it has one; else over point-to-point), the node
    /// leaders meet, and each node's ranks meet again.
    Hier(Core),
    /// hwbarr's linear barrier over point-to-point serves every kind of
    /// barrier: agreed on, or (`fallback`) for want of a device or of a
    /// common protocol.
    Linear { fallback: bool },
}

/// What a communicator's barriers are asked to do (its parameters).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The `algorithm` parameter (`auto` is resolved by the node's size).
    pub requested: Algorithm,
    /// The `inter` parameter (None: auto by node count).
    pub inter: Option<InterAlgorithm>,
    pub verbose: c_int,
    pub policy: WaitPolicy,
    /// The `topology` parameter: where node-local ranks sit in the caches.
    pub topology: Topology,
    /// This process's place by its binding (`topology` auto).
    pub own_place: Place,
    /// Under MPI_THREAD_MULTIPLE: the policy while this process's waiting
    /// threads outnumber the cores (`wait::Crowd`).
    pub crowd: Option<Crowd>,
    /// What `policy` and `crowd` were chosen from, to choose again if the
    /// layout exchange finds more of our ranks on this node (None: keep
    /// them).
    pub facts: Option<PolicyFacts>,
    /// How long a first exchange waits before the rank says whom it waits
    /// for (`exchange::lookout`); None: never.
    pub stall_notice: Option<Duration>,
    /// Candidate lines the line barrier tries over the first barriers
    /// (`coll_hwbarr_line_candidates`; 1 or less: none).
    pub line_candidates: usize,
    /// ns between two looks of MPI_Barrier's line path
    /// (`coll_hwbarr_line_poll_gap`; 0: a look after each PAUSE).
    pub line_poll_gap_ns: f64,
}

#[cfg(test)]
impl Options {
    /// The unit tests' options: `requested` and `inter`, quiet, no place in
    /// the caches (polled: L3 domains of 2 ranks, so that its tree has
    /// leaders between the root and the leaves), polls that turn progress
    /// and yield every 16 (ranks are threads sharing cores), no stall
    /// notice.
    pub fn for_tests(requested: Algorithm, inter: Option<InterAlgorithm>) -> Options {
        let topology = match requested {
            Algorithm::Polled => Topology::Synthetic { packages: 1, l3_per_package: 2, cores_per_l3: 2 },
            _ => Topology::Flat,
        };
        Options {
            requested,
            inter,
            verbose: 0,
            policy: WaitPolicy { spins: 16, progress: true, idle: crate::settings::Idle::Yield, quiet: 0, adapts: false },
            topology,
            own_place: Place::UNKNOWN,
            crowd: None,
            facts: None,
            stall_notice: None,
            line_candidates: 1,
            line_poll_gap_ns: crate::pause::LINE_POLL_GAP_NS,
        }
    }
}

/// Ranks of a communicator that may say that its first exchange waits
/// long (`Comm::stall`).
pub const STALL_SPEAKERS: c_int = 4;

/// One communicator's barrier state.
pub struct Comm<P: P2p> {
    p2p: P,
    rank: c_int,
    size: c_int,
    cid: u32,
    opts: Options,
    /// Members on more than one node: hierarchical barrier.
    multi_node: bool,
    /// Who shares our node; known at creation for one-node communicators,
    /// found by the first exchange for those spanning nodes.
    layout: OnceLock<Layout>,
    /// The waiting policy and crowd chosen again once the layout exchange
    /// found more of our ranks on this node than Open MPI told at creation.
    recounted: OnceLock<(WaitPolicy, Option<Crowd>)>,
    /// Multi-node: the leaders' algorithm, agreed in the first exchange.
    inter: OnceLock<InterAlgorithm>,
    /// The device once set up (the node's, across nodes): never changes
    /// afterwards, read without locks.
    seg: OnceLock<Segment>,
    /// Set once the ranks agree; None while the first exchange runs.
    route: OnceLock<Routed>,
    /// The first error a barrier on this communicator returned (0: none).
    /// After one, ranks may be out of step (requests left posted), so every
    /// later barrier fails with it instead of mismatching messages.
    broken: AtomicI32,
    /// Our first barrier here is over: a failure notice of ours is for a
    /// later barrier (`p2p::FAILED_LATER`).
    first_over: AtomicBool,
    /// The first exchange's lookout took a peer's notice for a later
    /// barrier: the communicator fails once our first barrier is over.
    later_notice: Arc<AtomicBool>,
    served: AtomicU64,
    served_async: AtomicU64,
    /// Of `served`: barriers a lone thread's line path served where threads
    /// may crowd (`crowd_line`), for the verbose served line.
    served_lone: AtomicU64,
}

/// The agreed route, and the first polls of MPI_Barrier's line path
/// (`barrier::device::line_barrier`; 0 polls: it does not take it): that
/// path is for the line core one node wide where a waiter polls before its
/// general loop (`wait::first_round`; of a waiter alone where threads may
/// crowd, `crowd_line`). Set together and read from one place, so
/// that the line path's one check before an arrival touches no other
/// line.
#[derive(Clone, Copy, Debug)]
struct Routed {
    route: Route,
    line: LinePolls,
    /// The line path where threads of a rank may wait at once
    /// (MPI_THREAD_MULTIPLE, `wait::Crowd`; `line` has no polls then): for a
    /// barrier that found no other thread of its process waiting
    /// (`wait::threads_waiting`). Their loop counts each waiter from its
    /// first poll and yields among them; the path's polls come before that
    /// count (about 0.5 µs at the default gap, up to about 50 µs at
    /// `coll_hwbarr_line_poll_gap`'s largest). Without the path such a program's
    /// 2-rank barrier took 164-192 ns against 63-88 (docs/benchmarks.md,
    /// "One thread waiting in MPI_THREAD_MULTIPLE"). Apart from `line`, so
    /// that the path's check where threads do not crowd stays one load.
    crowd_line: LinePolls,
}

/// The first round of MPI_Barrier's line path: its polls, and the PAUSEs
/// after each (`pause::line_path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinePolls {
    pub polls: u32,
    pub pauses: u32,
}

impl<P: P2p> Comm<P> {
    pub fn new(p2p: P, rank: c_int, size: c_int, cid: u32, multi_node: bool, opts: Options) -> Self {
        Comm {
            p2p,
            rank,
            size,
            cid,
            opts,
            multi_node,
            layout: if multi_node { OnceLock::new() } else { OnceLock::from(Layout::single(rank, size)) },
            recounted: OnceLock::new(),
            inter: OnceLock::new(),
            seg: OnceLock::new(),
            route: OnceLock::new(),
            broken: AtomicI32::new(0),
            first_over: AtomicBool::new(false),
            later_notice: Arc::default(),
            served: AtomicU64::new(0),
            served_async: AtomicU64::new(0),
            served_lone: AtomicU64::new(0),
        }
    }

    pub fn p2p(&self) -> &P {
        &self.p2p
    }

    /// The transport to use from now on (Open MPI hands the module its
    /// communicator again when it enables it).
    pub fn set_p2p(&mut self, p2p: P) {
        self.p2p = p2p;
    }

    pub fn rank(&self) -> c_int {
        self.rank
    }

    pub fn size(&self) -> c_int {
        self.size
    }

    pub fn policy(&self) -> WaitPolicy {
        self.recounted.get().map_or(self.opts.policy, |w| w.0)
    }

    /// The line barrier's trial on this node's device, shared by `local`
    /// ranks of ours (`shm::line_pick`), over the communicator's first
    /// barriers: the parameter's candidate lines where ranks keep their
    /// cores (the spin policy) and are no more than the cores. None
    /// (`Trial::NONE`) where ranks share cores, as the scheduler, not the
    /// line, sets a barrier's time there.
    pub fn line_trial(&self, local: usize) -> Trial {
        // The facts as the layout exchange may recount them (`adopt_layout`,
        // which may not have run yet).
        let own = match self.opts.facts {
            Some(f) => {
                let f = f.recounted(local).unwrap_or(f);
                f.policy().keeps_core() && f.ranks_here() <= f.cores && !CONTENTION.shared()
            }
            None => self.policy().keeps_core(),
        };
        if own {
            Trial { lines: self.opts.line_candidates }
        } else {
            Trial::NONE
        }
    }

    /// The trial of the candidate lines ended on this rank (`seg`'s): rank
    /// 0 says what it picked, at verbosity 1.
    pub fn line_trial_over(&self, seg: &Segment) {
        if let (0, true, (slot, Some((slots, ns, first)))) = (self.rank, self.opts.verbose >= 1, seg.line_in_use()) {
            report::verbose(1, &format!(
                "communicator '{}' (cid {}): the line barrier runs on line {slot} of {slots} candidates, \
                 fastest in their trial over {} barriers after its first: {ns:.0} ns per barrier against {first:.0} ns on the first",
                self.name(),
                self.cid,
                LineTrial::barriers(slots)
            ));
        }
    }

    /// The policy while many threads of this process wait (MPI_THREAD_MULTIPLE).
    pub fn crowd(&self) -> Option<Crowd> {
        self.recounted.get().map_or(self.opts.crowd, |w| w.1)
    }

    /// The place in the node's caches of node-local rank `local` (ours is
    /// `layout().me`), for the device's toggle tree.
    pub fn place(&self, local: usize) -> Place {
        self.opts.topology.place(local, self.opts.own_place)
    }

    /// The agreed route; None while the first exchange runs.
    pub fn route(&self) -> Option<Route> {
        self.route.get().map(|r| r.route)
    }

    /// The algorithm this rank runs: the agreed one, or until then its own
    /// as it brings it to the first exchange (`settings`).
    pub fn algorithm(&self) -> Algorithm {
        match self.route() {
            Some(Route::Device(c) | Route::Hier(c)) => c.algorithm(),
            Some(Route::Linear { .. }) => Algorithm::Linear,
            None => self.settings().algorithm,
        }
    }

    /// What this rank brings to the first exchange. One node: `auto`
    /// resolved by the communicator's size, which is the node's. Spanning
    /// nodes: as requested, since the node sizes are known only once the
    /// layout exchange has run; rank 0 resolves it there by the most
    /// populous node (`exchange::layout`).
    pub fn settings(&self) -> Settings {
        let algorithm = if self.multi_node { self.opts.requested } else { self.opts.requested.for_node(self.size as usize, self.own_cores()) };
        Settings { algorithm, inter: self.opts.inter }
    }

    /// Did this rank ask for `auto`? (Then any resolution of rank 0's is
    /// its wish too.)
    pub fn asks_auto(&self) -> bool {
        self.opts.requested == Algorithm::Auto
    }

    /// Whether this rank's waits keep their core (the automatic policy
    /// found a core per rank, or the user asked to spin): `auto`'s fact
    /// for the trees (`Algorithm::for_node`). Rank 0's decides.
    pub fn own_cores(&self) -> bool {
        let p = self.policy();
        p.keeps_core() && !(p.adapts && CONTENTION.shared())
    }

    /// `own_cores` for a node found to hold `ranks` of ours by the layout
    /// exchange (rank 0 resolves `auto` by the most populous node).
    pub fn own_cores_by_count(&self) -> impl Fn(usize) -> bool + Send + 'static {
        let (facts, own) = (self.opts.facts, self.own_cores());
        move |ranks| match facts.and_then(|f| f.recounted(ranks)) {
            Some(f) => f.policy().keeps_core(),
            None => own,
        }
    }

    pub fn is_multi_node(&self) -> bool {
        self.multi_node
    }

    /// Who shares our node, once known.
    pub fn layout(&self) -> Option<&Layout> {
        self.layout.get()
    }

    /// The device, once set up.
    pub fn segment(&self) -> Option<&Segment> {
        self.seg.get()
    }

    /// The leaders' algorithm, once agreed (multi-node).
    pub fn inter_algorithm(&self) -> InterAlgorithm {
        *self.inter.get().expect("layout known")
    }

    /// When and as whom its first exchange says that it waits long: on
    /// ranks 0 to `STALL_SPEAKERS - 1` only. Rank 0 waits for every rank
    /// that has not answered and names them; the others wait for rank 0,
    /// and in a job of thousands a rank 0 busy for minutes before its first
    /// barrier would otherwise have every rank say so.
    pub fn stall(&self) -> Option<Stall> {
        let after = self.opts.stall_notice.filter(|_| self.rank < STALL_SPEAKERS)?;
        Some(Stall { after, rank: self.rank, cid: self.cid })
    }

    /// The lookout of a first exchange on this communicator, started by a
    /// call that took `tag` (`exchange::lookout`).
    pub fn lookout(&self, tag: Option<c_int>) -> Lookout {
        Lookout::new(tag, self.stall()).telling(self.later_notice.clone())
    }

    /// Our first barrier here is over (its exchanges' outcome adopted).
    /// If its lookout took a peer's notice for a later barrier, the
    /// communicator fails now, so that our next barrier ends with the
    /// error that notice would have brought it.
    pub fn first_barrier_over(&self) {
        self.first_over.store(true, Release);
        if self.later_notice.load(Relaxed) {
            self.fail(ERROR);
        }
    }

    /// The error that broke this communicator's barriers, if any.
    pub fn broken(&self) -> Option<c_int> {
        Some(self.broken.load(Relaxed)).filter(|&rc| rc != 0)
    }

    /// Records the first error of hwbarr's own exchanges on this
    /// communicator (a failed operation of ours, a peer's failure notice,
    /// the device's failure word), and tells the ranks that may wait for
    /// us: the device's failure word for the ranks sharing it, a failure
    /// notice in place of our next message for the others. Each rank that
    /// learns does the same, so every rank's barrier on this communicator
    /// ends with an error, the current one or, for a rank the failed
    /// exchange had already released, its next one. Later ones fail at once.
    pub fn fail(&self, rc: c_int) {
        if p2p::is_process_failure(rc) {
            // A process failed, or the communicator was revoked: as Open
            // MPI's own revocation does (`revoked`).
            return self.revoked(rc);
        }
        let rc = if rc == 0 { ERROR } else { rc };
        if self.broken.compare_exchange(0, rc, Relaxed, Relaxed).is_err() {
            return;
        }
        if let Some(seg) = self.seg.get() {
            seg.set_failed();
        }
        // A panic here (a second bug, on a rank already failing) costs one
        // notice, never the others: every peer that may wait for us when
        // we cannot tell which.
        let everyone = || (0..self.size).filter(|&q| q != self.rank).collect();
        let peers = report::contain(|| self.describe("the failure notices"), || self.waiting_on_us()).unwrap_or_else(everyone);
        let notice = if self.first_over.load(Acquire) { p2p::FAILED_LATER } else { p2p::FAILED };
        for q in peers {
            report::contain(|| self.describe(&format!("a failure notice to rank {q}")), || p2p::send_notice(&self.p2p, q, notice));
        }
    }

    /// Open MPI's fault tolerance (ULFM) revoked this communicator's
    /// collectives: one of its processes failed, or MPIX_Comm_revoke. Every
    /// barrier on it, in flight or to come, ends with `rc`. Every process
    /// learns from Open MPI itself, so no notices; the device's failure word
    /// tells the ranks sharing it sooner (a sleeper within a sleep slice),
    /// whether or not their own progress has turned yet.
    pub fn revoked(&self, rc: c_int) {
        if rc <= 0 {
            return self.fail(ERROR);
        }
        let _ = self.broken.compare_exchange(0, rc, Relaxed, Relaxed);
        if let Some(seg) = self.seg.get() {
            seg.set_revoked(rc);
        }
    }

    /// A device adopted after a revocation (its exchange was in flight):
    /// marked, so that the ranks released onto it learn too.
    fn mark_if_revoked(&self) {
        if let (Some(rc), Some(seg)) = (self.broken().filter(|&rc| p2p::is_process_failure(rc)), self.seg.get()) {
            seg.set_revoked(rc);
        }
    }

    /// `what` on this communicator, for a warning.
    pub(crate) fn describe(&self, what: &str) -> String {
        format!("{what} on communicator '{}' (cid {}, rank {})", self.name(), self.cid, self.rank)
    }

    /// Runs `step`, a step of one of hwbarr's barriers on this communicator
    /// (an exchange, a protocol). A panic in it, a bug of hwbarr's, becomes
    /// one warning and an error, which fails the communicator as any error
    /// of a step does (`barrier::run`, `engine`: `fail`), so that its peers
    /// are told instead of waiting for ever on a rank that left.
    #[inline(always)]
    pub fn contained<T>(&self, step: impl FnOnce() -> Result<T, c_int>) -> Result<T, c_int> {
        report::contain(|| self.describe("a barrier"), step).unwrap_or(Err(ERROR))
    }

    /// Passes `r` on, failing the communicator (`fail`) if it is an error.
    pub fn failing<T>(&self, r: Result<T, c_int>) -> Result<T, c_int> {
        r.inspect_err(|&rc| self.fail(rc))
    }

    /// The ranks that may wait for a message from us on this communicator
    /// (now, or in their next barrier), and so get a failure notice from
    /// `fail`. The ranks of our device learn from its failure word.
    fn waiting_on_us(&self) -> Vec<c_int> {
        // A gatherer (members[0]) waits for every member; the others for it.
        let star = |members: &[c_int], me: usize| -> Vec<c_int> {
            if me == 0 {
                members[1..].to_vec()
            } else {
                members[..1].to_vec()
            }
        };
        match self.route() {
            // The first exchange is not over: who waits for whom depends on
            // a layout that some ranks may know and we may not.
            None => (0..self.size).filter(|&q| q != self.rank).collect(),
            // hwbarr's linear barrier serves every kind of barrier.
            Some(Route::Linear { .. }) => {
                let all: Vec<c_int> = (0..self.size).collect();
                star(&all, self.rank as usize)
            }
            // The device serves, and its failure word tells.
            Some(Route::Device(_)) => Vec::new(),
            Some(Route::Hier(_)) => {
                let t = self.layout.get().expect("layout known once agreed");
                let mut peers: Vec<c_int> =
                    if t.is_leader() { t.leaders.iter().copied().filter(|&q| q != self.rank && q != NO_LEADER).collect() } else { Vec::new() };
                if self.seg.get().is_none() && t.local.len() > 1 {
                    // The node's device is being set up, or could not be.
                    peers.extend(star(&t.local, t.me));
                }
                peers
            }
        }
    }

    fn name(&self) -> String {
        self.p2p.name()
    }

    /// One more barrier served by its issuer or under the queue's lock. Not
    /// a read-modify-write (no locked instruction on the fast path): these
    /// counts never run concurrently (MPI orders collectives per
    /// communicator; the issuer counts only after finding nothing in flight,
    /// and the queue's last count happens before `queued` reads false).
    /// Progress passes, which may run beside the issuer, count into
    /// `served_async` (`count_served_async`).
    pub fn count_served(&self) {
        wait::bump(&self.served);
    }

    /// Counts a barrier served by the line path of a thread that found no
    /// other of its process waiting (`crowd_line`); the issuer's, as
    /// `count_served`.
    pub fn count_served_lone(&self) {
        wait::bump(&self.served_lone);
    }

    /// Counts a barrier that a progress pass completed, maybe on another
    /// thread while the issuer runs the next one (`count_served` is the
    /// issuer's, a plain add on its own path).
    pub fn count_served_async(&self) {
        self.served_async.fetch_add(1, Relaxed);
    }

    /// Barriers served so far.
    pub fn served(&self) -> u64 {
        self.served.load(Relaxed) + self.served_async.load(Relaxed)
    }

    /// The waiting policy, as verbose output states it.
    fn waiting(&self) -> String {
        let (p, crowd) = (self.policy(), self.crowd());
        let mut text = format!("waiting by {:?}, {} polls per progress turn", p.idle, p.spins);
        if let Some(c) = crowd {
            text += &format!(
                "; by {:?}, {} polls, while more than {} threads of a rank wait",
                c.policy.idle, c.policy.spins, c.above
            );
        }
        text
    }

    /// One node, first barrier: the device exchange is over. Keeps the
    /// segment and sets the route by what the ranks agreed.
    pub fn adopt_device(&self, agreed: Agreed, seg: Option<Segment>) {
        let name = self.name();
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{name}' (cid {}): {d}", self.cid));
        }
        let alg = agreed.algorithm;
        let route = match (seg, Core::of(alg), agreed.fallback) {
            (Some(seg), Some(core), _) => {
                if self.rank == 0 && self.opts.verbose >= 1 {
                    let alg = match self.opts.requested {
                        Algorithm::Auto if alg == Algorithm::Auto.for_node(self.size as usize, self.own_cores()) => {
                            format!("{alg} (auto: {} ranks, {})", self.size, self.waiting())
                        }
                        _ => format!("{alg} ({})", self.waiting()),
                    };
                    let tree = core.describe(&seg);
                    report::verbose(1, &format!(
                        "communicator '{name}' (cid {}, {} ranks, one node): barriers served by {alg} \
                         on shared memory ({} bytes{tree})",
                        self.cid,
                        self.size,
                        seg.layout().len
                    ));
                }
                let _ = self.seg.set(seg);
                self.mark_if_revoked();
                Route::Device(core)
            }
            (_, _, Some(why)) => {
                if self.rank == 0 {
                    report::warn(Topic::NoDevice, &format!(
                        "communicator '{name}' (cid {}): no shared-memory device ({why}); \
                         every barrier here runs hwbarr's linear barrier over point-to-point",
                        self.cid
                    ));
                }
                Route::Linear { fallback: true }
            }
            // Rank 0 runs linear: every rank does, every kind of barrier.
            _ => {
                self.say_linear(", one node");
                Route::Linear { fallback: false }
            }
        };
        self.set_route(route);
    }

    /// Sets the agreed route, with MPI_Barrier's line path where it takes
    /// it (`Routed`).
    fn set_route(&self, route: Route) {
        let polls = match route {
            Route::Device(Core::Line) => wait::first_round(self.policy().on_device(), None),
            _ => 0,
        };
        let pauses = if polls > 0 { pause::line_path(self.opts.line_poll_gap_ns) } else { 1 };
        let crowd = self.crowd().is_some();
        if polls > 0 && self.rank == 0 && self.opts.verbose >= 2 {
            let whom = if crowd { ", for a thread that finds no other of its process waiting" } else { "" };
            // The PAUSE is timed only for a gap (`pause::line_path`).
            let each = match self.opts.line_poll_gap_ns > 0.0 {
                true => format!(" ({:.1} ns each here)", pause::pause_ns()),
                false => String::new(),
            };
            report::verbose(2, &format!(
                "communicator '{}' (cid {}): MPI_Barrier's line path looks up to {polls} times, with {pauses} PAUSE \
                 instructions{each} after each look{whom}",
                self.name(),
                self.cid
            ));
        }
        let line = LinePolls { polls, pauses };
        let none = LinePolls { polls: 0, pauses };
        let (line, crowd_line) = if crowd { (none, line) } else { (line, none) };
        let _ = self.route.set(Routed { route, line, crowd_line });
    }

    /// The first round of MPI_Barrier's line path, if it takes it
    /// (`Routed`).
    #[inline]
    pub fn line_polls(&self) -> Option<LinePolls> {
        self.route.get().map(|r| r.line).filter(|l| l.polls > 0)
    }

    /// The first round of MPI_Barrier's line path where threads of a rank
    /// may crowd, if it takes it (`Routed::crowd_line`).
    pub fn crowd_line_polls(&self) -> Option<LinePolls> {
        self.route.get().map(|r| r.crowd_line).filter(|l| l.polls > 0)
    }

    /// Verbose level 1, from rank 0: rank 0 asked for the linear barrier, so
    /// every rank runs it over point-to-point (`place`: ", one node" or
    /// " on N nodes", as the other algorithms' lines say).
    fn say_linear(&self, place: &str) {
        if self.rank == 0 && self.opts.verbose >= 1 {
            report::verbose(1, &format!(
                "communicator '{}' (cid {}, {} ranks{place}): barriers served by linear over point-to-point",
                self.name(),
                self.cid,
                self.size
            ));
        }
    }

    /// Multi-node, first barrier: the layout is known, and rank 0's
    /// settings (`agreed`: local algorithm and leaders' algorithm, or why
    /// every rank falls back). Sets the route; the node's device follows
    /// (`adopt_node_device`).
    pub fn adopt_layout(&self, t: Layout, agreed: Agreed) {
        let _ = self.inter.set(agreed.inter.expect("the layout exchange agrees on the leaders' algorithm"));
        let nodes = t.nodes;
        if let Some(f) = self.opts.facts.and_then(|f| f.recounted(t.local.len())) {
            let _ = self.recounted.set((f.policy(), f.crowd()));
        }
        let _ = self.layout.set(t);
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{}' (cid {}): {d}", self.name(), self.cid));
        }
        let route = match (agreed.fallback, Core::of(agreed.algorithm)) {
            (Some(why), _) => {
                if self.rank == 0 {
                    report::warn(Topic::NoDevice, &format!(
                        "communicator '{}' (cid {}): {why}; every barrier here runs hwbarr's linear barrier \
                         over point-to-point",
                        self.name(),
                        self.cid
                    ));
                }
                Route::Linear { fallback: true }
            }
            (None, Some(core)) => Route::Hier(core),
            // Linear over the whole communicator, every kind of barrier.
            (None, None) => {
                self.say_linear(&format!(" on {nodes} nodes"));
                Route::Linear { fallback: false }
            }
        };
        self.set_route(route);
    }

    /// Multi-node, first barrier: our node's device is set up (`Some(Ok)`),
    /// could not be (`Some(Err)`: the local phases run over point-to-point),
    /// or is not needed (`None`: alone on the node).
    pub fn adopt_node_device(&self, outcome: Option<Result<Segment, String>>) {
        let t = self.layout.get().expect("layout known");
        let local_note = match outcome {
            None => "alone on its node".to_string(),
            Some(Ok(seg)) => {
                let tree = match self.route() {
                    Some(Route::Hier(core)) => core.describe(&seg),
                    _ => String::new(),
                };
                let _ = self.seg.set(seg);
                self.mark_if_revoked();
                // Rank 0's settings won: only rank 0 knows that `auto` chose.
                let auto = match self.opts.requested {
                    Algorithm::Auto
                        if self.rank == 0
                            && self.algorithm() == Algorithm::Auto.for_node(t.largest, self.own_cores_by_count()(t.largest)) =>
                    {
                        format!(" (auto: {} ranks on the most populous node)", t.largest)
                    }
                    _ => String::new(),
                };
                format!("{}{auto} on shared memory ({}{tree})", self.algorithm(), self.waiting())
            }
            // No segment: the local phases run over point-to-point.
            Some(Err(why)) => {
                format!("linear over point-to-point (no shared memory: {why})")
            }
        };
        if self.opts.verbose >= 1 && (self.rank == 0 || (t.is_leader() && self.opts.verbose >= 2)) {
            let between = match t.nodes {
                1 => "none (one node by host name)".to_string(),
                _ => format!("{} among leaders", self.inter_algorithm()),
            };
            report::verbose(1, &format!(
                "communicator '{}' (cid {}, {} ranks on {} nodes): node of rank {}: {}{local_note}; \
                 between nodes: {between}",
                self.name(),
                self.cid,
                self.size,
                t.nodes,
                self.rank,
                match t.local.len() {
                    1 => String::new(),
                    k => format!("{k} ranks, "),
                },
            ));
        }
    }

    /// At verbosity 2: a line about this rank's part of the communicator,
    /// named as the served line and the start windows' report name it.
    pub fn report_rank(&self, what: &str) {
        if self.opts.verbose >= 2 {
            report::verbose(2, &format!("rank {} of communicator cid {}: {what}", self.rank, self.cid));
        }
    }

    /// At release: the verbose line with the count of barriers served.
    pub fn report_served(&self) {
        let served = self.served();
        if self.opts.verbose >= 2 && served > 0 {
            let alg = match (self.route(), self.layout()) {
                (Some(Route::Linear { fallback: true }), _) => "linear (no device)".to_string(),
                // Spanning nodes: what this rank ran, on its node and
                // (a leader) between nodes.
                (Some(Route::Hier(core)), Some(t)) => {
                    let inter = self.inter_algorithm();
                    // Without its node's device, the node's phases ran
                    // over point-to-point (`adopt_node_device`).
                    let local = match self.seg.get() {
                        Some(_) => core.algorithm().to_string(),
                        None => "linear over point-to-point".to_string(),
                    };
                    match (t.local.len(), t.is_leader() && t.nodes > 1) {
                        (1, _) => format!("{inter} between nodes (alone on its node)"),
                        (_, true) => format!("{local} on its node and {inter} between nodes"),
                        (_, false) => format!("{local} on its node"),
                    }
                }
                _ => self.algorithm().to_string(),
            };
            let lone = match self.served_lone.load(Relaxed) {
                0 => String::new(),
                n => format!(" ({n} of them by the line path of a thread alone in its wait)"),
            };
            self.report_rank(&format!("served {served} barriers with {alg}{lone}"));
        }
    }
}

/// Once per process each, the first time a wait found its core shared
/// and the first time one moved its thread off a shared CPU
/// (`contention`): says so at verbosity 1; a moved thread that did not
/// get its affinity back, always (verbosity 0). After every wait, and
/// after a progress pass that tested the core: one load where there is
/// nothing to say.
#[inline]
pub fn tell_if_shared() {
    if CONTENTION.news() {
        tell_news();
    }
}

#[cold]
#[inline(never)]
fn tell_news() {
    let rank = report::world_rank_label();
    if CONTENTION.first_stuck() {
        report::verbose(
            0,
            &format!(
                "world rank {rank}: a waiting thread moved off a CPU it shared did not get its CPU affinity \
                 back (sched_setaffinity refused it twice; a cpuset that changed meanwhile?): it keeps only \
                 the CPUs it was moved among (those of its L3 cache where it had any). hwbarr moves no \
                 thread again in this process"
            ),
        );
    }
    if CONTENTION.first_move() {
        report::verbose(
            1,
            &format!(
                "world rank {rank}: this process's waits took turns with another task on one CPU while its \
                 affinity allows others: moved a waiting thread to another CPU (a finding tries this \
                 up to {} times in a row before its waits give the core up)",
                crate::contention::MOVE_TRIES
            ),
        );
    }
    if !(CONTENTION.shared() && CONTENTION.first_finding()) {
        return;
    }
    report::verbose(
        1,
        &format!(
            "world rank {rank}: this process's waits hand its core to other tasks (its ranks share \
             cores the count of cores online does not show, or another program runs there): its \
             waits give the core up, for the next {} waits, then look again",
            crate::contention::SHARED_LOOKS
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::mem;

    /// Only the first `STALL_SPEAKERS` ranks say that a first exchange
    /// waits long, and none when the notice is off.
    #[test]
    fn the_first_ranks_say_that_a_first_exchange_waits_long() {
        let eps = mem::network(&["a"; 6]);
        let comm = |r: usize, notice| {
            let opts = Options { stall_notice: notice, ..Options::for_tests(Algorithm::Line, None) };
            Comm::new(eps[r].clone(), r as c_int, 6, 3, false, opts)
        };
        let after = Some(Duration::from_secs(60));
        let speakers: Vec<c_int> = (0..6).filter_map(|r| comm(r, after).stall()).map(|s| s.rank).collect();
        assert_eq!(speakers, (0..STALL_SPEAKERS).collect::<Vec<_>>());
        assert!(comm(0, after).stall().is_some_and(|s| s.after == Duration::from_secs(60) && s.cid == 3));
        assert!((0..6).all(|r| comm(r, None).stall().is_none()));
    }

    /// The line barrier's trial runs where ranks spin and are no more
    /// than the cores (as the layout may recount them), with the
    /// parameter's count.
    #[test]
    fn the_line_trial_needs_a_core_per_rank() {
        let eps = mem::network(&["a"; 2]);
        let facts = |idle| PolicyFacts {
            job_ranks: 2,
            comm_ranks: 2,
            cores: 2,
            yield_when_idle: false,
            spin: -1,
            idle,
            thread_multiple: false,
        };
        let comm = |f: PolicyFacts| {
            let opts = Options {
                policy: f.policy(),
                facts: Some(f),
                line_candidates: 16,
                ..Options::for_tests(Algorithm::Line, None)
            };
            Comm::new(eps[0].clone(), 0, 2, 3, false, opts)
        };
        let own = comm(facts(None));
        assert_eq!(own.line_trial(2), Trial { lines: 16 });
        assert_eq!(own.line_trial(3), Trial::NONE, "3 ranks found on 2 cores");
        assert_eq!(comm(facts(Some(crate::settings::Idle::Yield))).line_trial(2), Trial::NONE);
        let told_to_spin = PolicyFacts { job_ranks: 3, ..facts(Some(crate::settings::Idle::Spin)) };
        assert!(told_to_spin.policy().keeps_core());
        assert_eq!(comm(told_to_spin).line_trial(3), Trial::NONE);
    }
}
