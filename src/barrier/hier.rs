//! The barrier of a communicator that spans nodes, as a non-blocking state
//! machine, so that MPI_Ibarrier and the persistent barrier get it too: the
//! node's ranks meet (shared-memory device, or point-to-point if the device
//! could not be set up), the node leaders meet over the PML (`inter`), and
//! the node's ranks meet again, which releases them. The first operation
//! on a communicator finds the layout and sets the node's device up
//! instead; that exchange is itself a barrier.
//!
//! Each step only posts requests or reads shared words, and `poll` says
//! whether the operation is over, so the engine can drive it from MPI
//! progress while the application computes. The blocking MPI_Barrier keeps
//! its own direct path (`barrier`) once the layout is known and nothing is
//! queued. After an error the communicator's barriers stay
//! failed (`Comm::fail`): requests may be left posted, so peers
//! would otherwise match the wrong messages.

use std::ffi::c_int;

use crate::barrier::device::{self, Ticket};
use crate::barrier::inter::{self, InterAlgorithm};
use crate::barrier::linear::{self, LinearOp};
use crate::comm::{Comm, Core};
use crate::exchange::device::DeviceExchange;
use crate::exchange::layout::LayoutExchange;
use crate::exchange::lookout::Lookout;
use crate::exchange::words::Settings;
use crate::layout::Layout;
use crate::p2p::{Flight, P2p};
use crate::settings::Algorithm;

/// A node-local meeting in progress.
enum Local<P: P2p> {
    Device(Ticket),
    /// Linear among the node's ranks over point-to-point.
    Linear(LinearOp<P>),
}

/// The leaders' meeting in progress; `step` is dissemination's distance.
struct Leaders<P: P2p> {
    flight: Flight<P>,
    alg: InterAlgorithm,
    step: usize,
}

enum Stage<P: P2p> {
    /// First barrier: finding the layout (`exchange::layout`).
    Layout(Box<LayoutExchange<P>>),
    /// First barrier: setting the node's device up (`exchange::device`).
    Boot(Box<DeviceExchange<P>>),
    Gather(Local<P>),
    Leaders(Leaders<P>),
    Release(Local<P>),
}

/// One barrier on a communicator spanning nodes, in progress.
pub struct HierOp<P: P2p> {
    stage: Stage<P>,
    /// The node's core (None during the first barrier, which meets in
    /// the exchanges instead).
    core: Option<Core>,
}

impl<P: P2p> HierOp<P> {
    /// The first barrier on `st` (a communicator spanning nodes): finds the
    /// layout, then sets the node's device up; `lookout` watches it.
    pub fn first(st: &Comm<P>, lookout: Lookout) -> Result<HierOp<P>, c_int> {
        let x = LayoutExchange::start(st.p2p().clone(), st.rank(), st.size(), st.settings(), st.own_cores_by_count(), lookout)?;
        Ok(HierOp { stage: Stage::Layout(Box::new(x)), core: None })
    }

    /// A barrier on `st` once its route is agreed (`Route::Hier(core)`).
    pub fn start(st: &Comm<P>, core: Core) -> Result<HierOp<P>, c_int> {
        let t = st.layout().expect("layout known");
        Ok(HierOp { stage: Stage::Gather(local(st, t, core)?), core: Some(core) })
    }

    /// Advances without blocking; true when the barrier is over.
    pub fn poll(&mut self, st: &Comm<P>) -> Result<bool, c_int> {
        loop {
            let next = match &mut self.stage {
                Stage::Layout(x) => match x.poll()? {
                    None => return Ok(false),
                    Some((t, agreed)) => {
                        let alone = t.local.len() < 2;
                        let device = agreed.fallback.is_none() && agreed.algorithm != Algorithm::Linear;
                        let settings = Settings { algorithm: agreed.algorithm, inter: agreed.inter };
                        let boot = if alone || !device {
                            None
                        } else {
                            let (p2p, place) = (st.p2p().clone(), st.place(t.me));
                            // The node's barriers are polled by the wait loop
                            // (`device::tested`), not the line path: the trial
                            // times them as they run (not measured: one host here).
                            let trial = st.line_trial(t.local.len());
                            Some(DeviceExchange::start(p2p, &t.local, t.me, (settings, false), place, None, trial)?)
                        };
                        st.adopt_layout(t, agreed);
                        match boot {
                            None => {
                                if device {
                                    st.adopt_node_device(None);
                                }
                                st.first_barrier_over();
                                return Ok(true);
                            }
                            Some(b) => Stage::Boot(Box::new(b)),
                        }
                    }
                },
                Stage::Boot(b) => match b.poll()? {
                    None => return Ok(false),
                    Some((agreed, seg)) => {
                        st.adopt_node_device(Some(match (seg, agreed.fallback) {
                            (Some(seg), _) => Ok(seg),
                            (None, Some(why)) => Err(why),
                            (None, None) => Err("agreed on linear".into()),
                        }));
                        st.first_barrier_over();
                        return Ok(true);
                    }
                },
                Stage::Gather(l) => {
                    let t = st.layout().expect("layout known");
                    let core = self.core.expect("route agreed");
                    if !local_done(st, l)? {
                        return Ok(false);
                    }
                    if t.nodes < 2 {
                        // One node after all: every rank has arrived.
                        return Ok(true);
                    }
                    if t.is_leader() && t.leaders.len() > 1 {
                        let alg = st.inter_algorithm();
                        let mut g = Leaders { flight: Flight::new(st.p2p().clone()), alg, step: 1 };
                        inter::post(&mut g.flight, &t.leaders, t.node, alg, g.step)?;
                        Stage::Leaders(g)
                    } else {
                        Stage::Release(local(st, t, core)?)
                    }
                }
                Stage::Leaders(g) => {
                    let t = st.layout().expect("layout known");
                    if !g.flight.done()? {
                        return Ok(false);
                    }
                    if g.alg == InterAlgorithm::Dissemination && g.step * 2 < t.leaders.len() {
                        g.step *= 2;
                        inter::post(&mut g.flight, &t.leaders, t.node, g.alg, g.step)?;
                        continue;
                    }
                    Stage::Release(local(st, t, self.core.expect("route agreed"))?)
                }
                Stage::Release(l) => return local_done(st, l),
            };
            self.stage = next;
        }
    }
}

/// The blocking barrier on a communicator spanning nodes, once its layout
/// is known and nothing is queued: a node-local barrier (all local ranks
/// arrived), the leaders' inter-node barrier, then a node-local barrier
/// that releases the node's ranks. A communicator that Open MPI took for
/// one spanning nodes but whose ranks the layout found on one node
/// (another job's, joined by MPI_Comm_connect) needs the first only.
pub fn barrier<P: P2p>(st: &Comm<P>, core: Core) -> Result<(), c_int> {
    let t = st.layout().expect("layout known");
    local_phase(st, t, core)?;
    if t.nodes < 2 {
        return Ok(());
    }
    if t.is_leader() && t.leaders.len() > 1 {
        let mut f = Flight::new(st.p2p().clone());
        inter::barrier(&mut f, &t.leaders, t.node, st.inter_algorithm())?;
    }
    local_phase(st, t, core)
}

/// A blocking node-local meeting.
fn local_phase<P: P2p>(st: &Comm<P>, t: &Layout, core: Core) -> Result<(), c_int> {
    if t.local.len() < 2 {
        return Ok(());
    }
    match st.segment() {
        Some(_) => device::barrier(st, core),
        None => linear::barrier_among(st.p2p(), &t.local, t.me),
    }
}

/// Enters a node-local meeting: on the node's device, or linear among the
/// node's ranks if it has none (a rank alone on its node meets nobody).
fn local<P: P2p>(st: &Comm<P>, t: &Layout, core: Core) -> Result<Local<P>, c_int> {
    match st.segment() {
        Some(_) if t.local.len() > 1 => Ok(Local::Device(device::arrive(st, core))),
        _ => Ok(Local::Linear(LinearOp::start(st.p2p().clone(), &t.local, t.me)?)),
    }
}

fn local_done<P: P2p>(st: &Comm<P>, l: &mut Local<P>) -> Result<bool, c_int> {
    match l {
        Local::Device(ticket) => device::tested(st, *ticket),
        Local::Linear(op) => op.poll(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::{Options, Route};
    use crate::p2p::mem;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Ranks on `hosts` run the first barrier (layout and devices) as a
    /// non-blocking operation, then non-blocking and blocking barriers
    /// alternately; none may leave barrier k before every rank entered it.
    fn run(hosts: &'static [&'static str], algorithm: Algorithm, inter: InterAlgorithm) {
        let n = hosts.len();
        let entered = Arc::new(AtomicUsize::new(0));
        let nodes = mem::run(mem::network(hosts), move |ep| {
            let r = ep.rank();
            let opts = Options::for_tests(algorithm, Some(inter));
            let c = Comm::new(ep, r, n as c_int, 9, true, opts);
            let mut op = HierOp::first(&c, Lookout::new(None, None)).unwrap();
            while !op.poll(&c).unwrap() {
                std::thread::yield_now();
            }
            let t = c.layout().expect("layout found").clone();
            let core = Core::of(algorithm).expect("a device algorithm");
            assert_eq!((c.route(), c.inter_algorithm()), (Some(Route::Hier(core)), inter));
            assert_eq!(c.segment().is_some(), t.local.len() > 1, "a device where ranks share a node");
            for k in 1..=40 {
                entered.fetch_add(1, SeqCst);
                if k % 2 == 0 {
                    barrier(&c, core).unwrap();
                } else {
                    let mut op = HierOp::start(&c, core).unwrap();
                    while !op.poll(&c).unwrap() {
                        std::thread::yield_now();
                    }
                }
                assert!(entered.load(SeqCst) >= n * k, "rank {r} left barrier {k} early");
            }
            t.nodes
        });
        assert!(nodes.iter().all(|&l| l == hosts.iter().collect::<std::collections::HashSet<_>>().len()));
    }

    #[test]
    fn two_nodes_of_two_ranks() {
        run(&["a", "a", "b", "b"], Algorithm::Counter, InterAlgorithm::Counter);
        run(&["a", "b", "a", "b"], Algorithm::Toggle, InterAlgorithm::Dissemination);
        run(&["a", "b", "a", "b", "a", "a", "b"], Algorithm::Polled, InterAlgorithm::Counter);
    }

    /// Ranks that Open MPI took for remote (another job's, joined by
    /// MPI_Comm_connect) but that share our node: the layout exchange counts
    /// them by host name and the waiting policy is chosen again, and `auto`
    /// is resolved for a node that shares its cores. Here 4 ranks on one
    /// host of 2 cores, each rank told at creation of 2 ranks here (its job).
    #[test]
    fn ranks_found_on_the_node_choose_the_waiting_policy_again() {
        use crate::settings::Idle;
        use crate::wait::PolicyFacts;
        let facts = PolicyFacts {
            job_ranks: 2,
            comm_ranks: 2,
            cores: 2,
            yield_when_idle: false,
            spin: -1,
            idle: None,
            thread_multiple: true,
        };
        let out = mem::run(mem::network(&["a", "a", "a", "a"]), move |ep| {
            let r = ep.rank();
            let opts = Options {
                policy: facts.policy(),
                crowd: facts.crowd(),
                facts: Some(facts),
                ..Options::for_tests(Algorithm::Auto, Some(InterAlgorithm::Counter))
            };
            let c = Comm::new(ep, r, 4, 9, true, opts);
            let before = (c.policy().idle, c.crowd().is_some());
            let mut op = HierOp::first(&c, Lookout::new(None, None)).unwrap();
            while !op.poll(&c).unwrap() {
                std::thread::yield_now();
            }
            (before, (c.policy().idle, c.crowd().is_some()), c.algorithm(), c.layout().unwrap().local.len())
        });
        for (before, after, algorithm, here) in out {
            assert_eq!(before, (Idle::Spin, true), "2 ranks on 2 cores: each keeps its core");
            assert_eq!(here, 4);
            assert_eq!(after, (Idle::Sleep, false), "4 ranks on 2 cores share them");
            assert_eq!(algorithm, Algorithm::Auto.for_node(4, false), "auto for shared cores");
        }
        // Nothing to choose again when the count holds: 3 ranks on each of
        // two hosts of 8 cores, as told at creation, keep their cores, and
        // `auto` resolves for ranks that keep them.
        let roomy = PolicyFacts { job_ranks: 3, comm_ranks: 3, cores: 8, ..facts };
        let same = mem::run(mem::network(&["a", "a", "a", "b", "b", "b"]), move |ep| {
            let r = ep.rank();
            let opts = Options { policy: roomy.policy(), facts: Some(roomy), ..Options::for_tests(Algorithm::Auto, None) };
            let c = Comm::new(ep, r, 6, 9, true, opts);
            let mut op = HierOp::first(&c, Lookout::new(None, None)).unwrap();
            while !op.poll(&c).unwrap() {
                std::thread::yield_now();
            }
            (c.policy().idle, c.algorithm())
        });
        let own = Algorithm::Auto.for_node(3, true);
        assert_ne!(own, Algorithm::Auto.for_node(3, false), "the case must tell the two apart");
        assert!(same.iter().all(|&s| s == (Idle::Spin, own)), "{same:?}");
    }

    /// Open MPI took them for several nodes, the layout finds one: a
    /// single node-local barrier per barrier, with the same semantics.
    #[test]
    fn one_node_found_by_host_name() {
        run(&["a", "a", "a"], Algorithm::Toggle, InterAlgorithm::Counter);
        run(&["a", "a", "a", "a"], Algorithm::Counter, InterAlgorithm::Dissemination);
        run(&["a", "a"], Algorithm::Line, InterAlgorithm::Counter);
    }

    #[test]
    fn uneven_nodes_and_four_leaders() {
        run(&["a", "b", "b", "c"], Algorithm::Toggle, InterAlgorithm::Counter);
        run(&["a", "b", "c", "d"], Algorithm::Counter, InterAlgorithm::Dissemination);
    }
}
