//! One communicator's barrier state, apart from the Open MPI objects that
//! carry it (`engine::Server`, `ompi::module`): what its ranks agreed on,
//! who shares a node, the device, the waiting policy, and the barriers
//! that run on them (device, hierarchical, linear). Generic over the
//! point-to-point transport, so that unit tests run it in memory.

use std::ffi::c_int;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8};
use std::sync::OnceLock;

use crate::agree::Settings;
use crate::bootstrap::{Agreed, Verdict};
use crate::core::{counter, toggle};
use crate::inter::{self, InterAlgorithm};
use crate::linear;
use crate::ompi::report::{self, Topic};
use crate::p2p::{self, Flight, P2p, ERROR};
use crate::settings::Algorithm;
use crate::shm::futex::Kernel;
use crate::shm::segment::Segment;
use crate::shm::sleep;
use crate::topo::Topo;
use crate::wait::{self, WaitPolicy};

/// Sleeps on the device's words last at most a slice of the wait.
const FUTEX: Kernel = Kernel { timeout: wait::SLEEP_SLICE };

/// Largest communicator `auto` gives the counter barrier: every rank sends
/// n-1 packets (n(n-1) remote atomics, and up to n-1 wake-ups when ranks
/// sleep), against one atomic per rank and one wake-up for toggle. Measured
/// on 2 cores: counter leads at 2 ranks, the two are within noise at 4, and
/// at 8 counter/toggle had per-round medians of 0.97 and 0.84 in two
/// `make bench` runs (README); above 8 the choice follows cost.
pub const AUTO_COUNTER_MAX_RANKS: usize = 8;

/// `auto`: the algorithm for a communicator of `size` ranks on one node.
pub fn choose(requested: Algorithm, size: usize) -> Algorithm {
    match requested {
        Algorithm::Auto if size <= AUTO_COUNTER_MAX_RANKS => Algorithm::Counter,
        Algorithm::Auto => Algorithm::Toggle,
        a => a,
    }
}

fn alg_code(a: Algorithm) -> u8 {
    match a {
        Algorithm::Toggle => 0,
        Algorithm::Counter => 1,
        Algorithm::Linear => 2,
        Algorithm::Auto => 3,
    }
}

fn alg_from(c: u8) -> Algorithm {
    match c {
        0 => Algorithm::Toggle,
        1 => Algorithm::Counter,
        2 => Algorithm::Linear,
        _ => Algorithm::Auto,
    }
}

/// Where a rank stands in the barrier it entered on the device.
#[derive(Clone, Copy, Debug)]
pub enum Ticket {
    Toggle(toggle::Target),
    Counter,
}

/// What a communicator's barriers are asked to do (its parameters).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The `algorithm` parameter (`auto` is resolved by size).
    pub requested: Algorithm,
    /// The `inter` parameter (None: auto by node count).
    pub inter: Option<InterAlgorithm>,
    pub verbose: c_int,
    pub policy: WaitPolicy,
}

/// One communicator's barrier state.
pub struct Comm<P: P2p> {
    p2p: P,
    rank: c_int,
    size: c_int,
    cid: u32,
    /// The algorithm (resolved from `auto`): ours until the first exchange,
    /// then rank 0's, which every rank runs (`agree`).
    algorithm: AtomicU8,
    /// The first exchange is over: `algorithm` is the agreed one.
    agreed: AtomicBool,
    opts: Options,
    /// Who shares our node; known at creation for one-node communicators,
    /// found on the first barrier for those spanning nodes.
    topo: OnceLock<Topo>,
    /// Members on more than one node: hierarchical barrier.
    multi_node: bool,
    /// The first error a barrier on this communicator returned (0: none).
    /// After one, ranks may be out of step (requests left posted), so every
    /// later barrier fails with it instead of mismatching messages.
    broken: AtomicI32,
    /// The device once set up: never changes afterwards, read without locks.
    seg: OnceLock<Segment>,
    /// Set up failed (or linear agreed on): hwbarr's linear barrier serves
    /// every kind of barrier (`engine`).
    unusable: AtomicBool,
    served: AtomicU64,
    /// Multi-node: the leaders' algorithm, fixed once the node count is known.
    inter: OnceLock<InterAlgorithm>,
}

impl<P: P2p> Comm<P> {
    pub fn new(p2p: P, rank: c_int, size: c_int, cid: u32, multi_node: bool, opts: Options) -> Self {
        Comm {
            p2p,
            rank,
            size,
            cid,
            algorithm: AtomicU8::new(alg_code(choose(opts.requested, size as usize))),
            agreed: AtomicBool::new(false),
            opts,
            topo: if multi_node { OnceLock::new() } else { OnceLock::from(Topo::single(rank, size)) },
            multi_node,
            broken: AtomicI32::new(0),
            seg: OnceLock::new(),
            unusable: AtomicBool::new(false),
            served: AtomicU64::new(0),
            inter: OnceLock::new(),
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

    pub fn algorithm(&self) -> Algorithm {
        alg_from(self.algorithm.load(Relaxed))
    }

    /// The first exchange is over.
    pub fn agreed(&self) -> bool {
        self.agreed.load(Acquire)
    }

    /// What this rank brings to the first exchange.
    pub fn settings(&self) -> Settings {
        Settings { algorithm: self.algorithm(), inter: self.opts.inter }
    }

    /// Serves MPI_Barrier on the shared-memory device (toggle, counter).
    pub fn on_device(&self) -> bool {
        matches!(self.algorithm(), Algorithm::Toggle | Algorithm::Counter)
    }

    /// Adopts rank 0's algorithm (first exchange). Release: a thread that
    /// sees `agreed` sees the algorithm.
    fn adopt(&self, a: Algorithm) {
        self.algorithm.store(alg_code(a), Relaxed);
        self.agreed.store(true, Release);
    }

    pub fn is_multi_node(&self) -> bool {
        self.multi_node
    }

    /// The topology, once known.
    pub fn topo(&self) -> Option<&Topo> {
        self.topo.get()
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
        let rc = if rc == 0 { ERROR } else { rc };
        if self.broken.compare_exchange(0, rc, Relaxed, Relaxed).is_err() {
            return;
        }
        if let Some(seg) = self.seg.get() {
            seg.set_failed();
        }
        p2p::send_notices(&self.p2p, self.waiting_on_us());
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
        if !self.agreed() {
            // The first exchange is not over: who waits for whom depends on
            // a layout that some ranks may know and we may not.
            return (0..self.size).filter(|&q| q != self.rank).collect();
        }
        if self.algorithm() == Algorithm::Linear || self.unusable() {
            // hwbarr's linear barrier serves every kind of barrier.
            let all: Vec<c_int> = (0..self.size).collect();
            return star(&all, self.rank as usize);
        }
        if !self.multi_node {
            // The device serves, and its failure word tells.
            return Vec::new();
        }
        let t = self.topo.get().expect("layout known once agreed");
        let mut peers: Vec<c_int> = if t.is_leader() { t.leaders.iter().copied().filter(|&q| q != self.rank).collect() } else { Vec::new() };
        if self.seg.get().is_none() && t.local.len() > 1 {
            // The node's device is being set up, or could not be.
            peers.extend(star(&t.local, t.me));
        }
        peers
    }

    pub fn unusable(&self) -> bool {
        self.unusable.load(Relaxed)
    }

    fn name(&self) -> String {
        self.p2p.name()
    }

    /// One more barrier served. Not a read-modify-write (no locked
    /// instruction on the fast path): barriers on one communicator never
    /// count concurrently (MPI orders collectives per communicator, and the
    /// engine's queue hands over through its `queued` flag's Release/Acquire).
    pub fn count_served(&self) {
        self.served.store(self.served.load(Relaxed) + 1, Relaxed);
    }

    /// Barriers served so far.
    pub fn served(&self) -> u64 {
        self.served.load(Relaxed)
    }

    /// Passes `r` on, failing the communicator (`fail`) if it is an error.
    fn failing<T>(&self, r: Result<T, c_int>) -> Result<T, c_int> {
        r.inspect_err(|&rc| self.fail(rc))
    }

    /// hwbarr's linear barrier over the whole communicator.
    pub fn linear_barrier(&self) -> Result<(), c_int> {
        self.failing(linear::barrier(&self.p2p, self.rank, self.size))?;
        self.count_served();
        Ok(())
    }

    /// The barrier on a ready device, one node: enter and wait.
    pub fn device_barrier(&self, seg: &Segment) -> Result<(), c_int> {
        let t = self.arrive(seg);
        self.wait(seg, t)?;
        self.count_served();
        Ok(())
    }

    /// Enters a barrier on the device, waking the sleepers our arrival
    /// released (`shm::sleep`: no lost wake-up, and no system call when
    /// nobody sleeps).
    pub fn arrive(&self, seg: &Segment) -> Ticket {
        let t = self.topo.get().expect("topology known before the device");
        let me = t.me;
        if self.algorithm() == Algorithm::Counter {
            let (cells, asleep) = (seg.counters(), seg.asleep());
            counter::arrive_with(cells, me, |q| sleep::counter_wake(&FUTEX, &cells[q], &asleep[q]));
            Ticket::Counter
        } else {
            let w = seg.wires();
            let (target, fired) = toggle::arrive(&t.shape, &w, me);
            if fired {
                sleep::toggle_wake(&FUTEX, &w, seg.sleepers());
            }
            Ticket::Toggle(target)
        }
    }

    /// Whether `t` is released; an error (and the communicator failed) if
    /// it is not and some rank marked the device failed: that rank may
    /// never arrive.
    pub fn released(&self, seg: &Segment, t: Ticket) -> Result<bool, c_int> {
        let done = match t {
            Ticket::Counter => counter::is_released(seg.counters(), self.topo.get().expect("topology").me),
            Ticket::Toggle(target) => toggle::is_released(&seg.wires(), target),
        };
        if !done && seg.failed() {
            self.fail(ERROR);
            return Err(ERROR);
        }
        Ok(done)
    }

    /// Waits by the policy until `t` is released (or the device failed).
    fn wait(&self, seg: &Segment, t: Ticket) -> Result<(), c_int> {
        let me = self.topo.get().expect("topology").me;
        let sleep = || match t {
            Ticket::Counter => sleep::counter_sleep(&FUTEX, &seg.counters()[me], &seg.asleep()[me]),
            Ticket::Toggle(target) => sleep::toggle_sleep(&FUTEX, &seg.wires(), seg.sleepers(), target),
        };
        wait::try_wait_until(self.opts.policy, || self.released(seg, t), || self.p2p.progress(), sleep)
    }

    /// Multi-node, first barrier: the layout is known, and rank 0's
    /// settings (`agreed`: local algorithm and leaders' algorithm, or why
    /// every rank falls back).
    pub fn layout_known(&self, t: Topo, agreed: crate::topo::Agreed) {
        let _ = self.inter.set(agreed.inter);
        let _ = self.topo.set(t);
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{}' (cid {}): {d}", self.name(), self.cid));
        }
        if let Some(why) = agreed.fallback {
            if self.rank == 0 {
                report::warn(Topic::NoDevice, &format!(
                    "communicator '{}' (cid {}): {why}; every barrier here runs hwbarr's linear barrier \
                     over point-to-point",
                    self.name(),
                    self.cid
                ));
            }
            self.unusable.store(true, Relaxed);
        } else if agreed.algorithm == Algorithm::Linear {
            // Linear over the whole communicator, every kind of barrier.
            self.unusable.store(true, Relaxed);
        }
        self.adopt(agreed.algorithm);
    }

    pub fn inter_algorithm(&self) -> InterAlgorithm {
        *self.inter.get().expect("layout known")
    }

    /// Multi-node, first barrier: our node's device is set up (`Some(Ok)`),
    /// could not be (`Some(Err)`: the local phases run over point-to-point),
    /// or is not needed (`None`: alone on the node).
    pub fn node_ready(&self, outcome: Option<Result<Segment, String>>) {
        let t = self.topo.get().expect("layout known");
        let local_note = match outcome {
            None => "alone on its node".to_string(),
            Some(Ok(seg)) => {
                let _ = self.seg.set(seg);
                format!("{} on shared memory ({})", self.algorithm(), self.waiting())
            }
            // No segment: the local phases run over point-to-point.
            Some(Err(why)) => {
                format!("linear over point-to-point (no shared memory: {why})")
            }
        };
        if self.opts.verbose >= 1 && (self.rank == 0 || (t.is_leader() && self.opts.verbose >= 2)) {
            report::verbose(1, &format!(
                "communicator '{}' (cid {}, {} ranks on {} nodes): node of rank {}: {} ranks, {local_note}; \
                 between nodes: {} among leaders",
                self.name(),
                self.cid,
                self.size,
                t.leaders.len(),
                self.rank,
                t.local.len(),
                self.inter_algorithm(),
            ));
        }
    }

    /// Node-local barrier (all local ranks arrived), the leaders' inter-node
    /// barrier, then a node-local barrier that releases the node's ranks.
    pub fn hier_barrier(&self, t: &Topo) -> Result<(), c_int> {
        self.failing(self.local_phase(t))?;
        if t.is_leader() && t.leaders.len() > 1 {
            let mut f = Flight::new(self.p2p.clone());
            let alg = *self.inter.get().expect("inter algorithm");
            self.failing(inter::barrier(&mut f, &t.leaders, t.node, alg))?;
        }
        self.failing(self.local_phase(t))
    }

    fn local_phase(&self, t: &Topo) -> Result<(), c_int> {
        if t.local.len() < 2 {
            return Ok(());
        }
        match self.seg.get() {
            Some(seg) => {
                let ticket = self.arrive(seg);
                self.wait(seg, ticket)
            }
            None => linear::barrier_among(&self.p2p, &t.local, t.me),
        }
    }

    /// The waiting policy, as verbose output states it.
    fn waiting(&self) -> String {
        format!("waiting by {:?}, {} polls per progress turn", self.opts.policy.idle, self.opts.policy.spins)
    }

    /// The device exchange finished (one node): adopt rank 0's algorithm,
    /// keep the segment, or give up on it.
    pub fn device_ready(&self, agreed: Agreed) {
        let name = self.name();
        if let (Some(d), 0) = (&agreed.disagreement, self.rank) {
            report::warn(Topic::Disagreement, &format!("communicator '{name}' (cid {}): {d}", self.cid));
        }
        let alg = agreed.algorithm;
        match agreed.verdict {
            Verdict::Device(seg) => {
                if self.rank == 0 && self.opts.verbose >= 1 {
                    let alg = match self.opts.requested {
                        Algorithm::Auto if alg == choose(Algorithm::Auto, self.size as usize) => {
                            format!("{alg} (auto: {} ranks, {})", self.size, self.waiting())
                        }
                        _ => format!("{alg} ({})", self.waiting()),
                    };
                    report::verbose(1, &format!(
                        "communicator '{name}' (cid {}, {} ranks, one node): MPI_Barrier served by {alg} \
                         on shared memory ({} bytes)",
                        self.cid,
                        self.size,
                        seg.layout().len
                    ));
                }
                let _ = self.seg.set(seg);
            }
            Verdict::Linear => {
                // Every rank runs linear, every kind of barrier.
                self.unusable.store(true, Relaxed);
            }
            Verdict::NoDevice(why) => {
                if self.rank == 0 {
                    report::warn(Topic::NoDevice, &format!(
                        "communicator '{name}' (cid {}): no shared-memory device ({why}); \
                         every barrier here runs hwbarr's linear barrier over point-to-point",
                        self.cid
                    ));
                }
                self.unusable.store(true, Relaxed);
            }
        }
        self.adopt(alg);
    }

    pub fn segment(&self) -> Option<&Segment> {
        self.seg.get()
    }

    /// At release: the verbose line with the count of barriers served.
    pub fn report_served(&self) {
        let served = self.served();
        if self.opts.verbose >= 2 && served > 0 {
            let alg = match self.algorithm() {
                Algorithm::Toggle | Algorithm::Counter if self.unusable() => "linear (no device)".to_string(),
                a => a.to_string(),
            };
            report::verbose(2, &format!(
                "rank {} of communicator cid {}: served {} barriers with {alg}",
                self.rank, self.cid, served
            ));
        }
    }
}
