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
//! its own direct path (`Comm::hier_barrier`) once the layout is known
//! and nothing is queued. After an error the communicator's barriers stay
//! failed (`Comm::fail`): requests may be left posted, so peers
//! would otherwise match the wrong messages.

use std::ffi::c_int;

use crate::agree::Settings;
use crate::bootstrap::{Boot, Verdict};
use crate::comm::{Comm, Ticket};
use crate::inter::{self, InterAlgorithm};
use crate::linear::LinearOp;
use crate::lookout::Lookout;
use crate::p2p::{Flight, P2p};
use crate::settings::Algorithm;
use crate::topo::{Exchange, Topo};

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
    Layout(Box<Exchange<P>>),
    Boot(Box<Boot<P>>),
    Gather(Local<P>),
    Leaders(Leaders<P>),
    Release(Local<P>),
}

/// One barrier on a communicator spanning nodes, in progress.
pub struct HierOp<P: P2p> {
    stage: Stage<P>,
}

impl<P: P2p> HierOp<P> {
    /// Enters a barrier on `st` (a communicator spanning nodes); `lookout`
    /// watches its first exchange, if this is the first barrier.
    pub fn start(st: &Comm<P>, lookout: Option<Lookout>) -> Result<HierOp<P>, c_int> {
        let stage = match st.topo() {
            None => {
                let lookout = lookout.unwrap_or(Lookout::new(None));
                Stage::Layout(Box::new(Exchange::start(st.p2p().clone(), st.rank(), st.size(), st.settings(), lookout)?))
            }
            Some(t) => Stage::Gather(local(st, t)?),
        };
        Ok(HierOp { stage })
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
                        let settings = Settings { algorithm: agreed.algorithm, inter: Some(agreed.inter) };
                        let boot = if alone || !device {
                            None
                        } else {
                            Some(Boot::start(st.p2p().clone(), &t.local, t.me, settings, None)?)
                        };
                        st.layout_known(t, agreed);
                        match boot {
                            None => {
                                if device {
                                    st.node_ready(None);
                                }
                                return Ok(true);
                            }
                            Some(b) => Stage::Boot(Box::new(b)),
                        }
                    }
                },
                Stage::Boot(b) => match b.poll()? {
                    None => return Ok(false),
                    Some(agreed) => {
                        st.node_ready(Some(match agreed.verdict {
                            Verdict::Device(seg) => Ok(seg),
                            Verdict::NoDevice(why) => Err(why),
                            Verdict::Linear => Err("agreed on linear".into()),
                        }));
                        return Ok(true);
                    }
                },
                Stage::Gather(l) => {
                    let t = st.topo().expect("layout known");
                    if !local_done(st, l)? {
                        return Ok(false);
                    }
                    if t.is_leader() && t.leaders.len() > 1 {
                        let alg = st.inter_algorithm();
                        let mut g = Leaders { flight: Flight::new(st.p2p().clone()), alg, step: 1 };
                        inter::post(&mut g.flight, &t.leaders, t.node, alg, g.step)?;
                        Stage::Leaders(g)
                    } else {
                        Stage::Release(local(st, t)?)
                    }
                }
                Stage::Leaders(g) => {
                    let t = st.topo().expect("layout known");
                    if !g.flight.done()? {
                        return Ok(false);
                    }
                    if g.alg == InterAlgorithm::Dissemination && g.step * 2 < t.leaders.len() {
                        g.step *= 2;
                        inter::post(&mut g.flight, &t.leaders, t.node, g.alg, g.step)?;
                        continue;
                    }
                    Stage::Release(local(st, t)?)
                }
                Stage::Release(l) => return local_done(st, l),
            };
            self.stage = next;
        }
    }
}

/// Enters a node-local meeting: on the node's device, or linear among the
/// node's ranks if it has none (a rank alone on its node meets nobody).
fn local<P: P2p>(st: &Comm<P>, t: &Topo) -> Result<Local<P>, c_int> {
    match st.segment() {
        Some(seg) if t.local.len() > 1 => Ok(Local::Device(st.arrive(seg))),
        _ => Ok(Local::Linear(LinearOp::start(st.p2p().clone(), &t.local, t.me)?)),
    }
}

fn local_done<P: P2p>(st: &Comm<P>, l: &mut Local<P>) -> Result<bool, c_int> {
    match l {
        Local::Device(ticket) => st.released(st.segment().expect("device"), *ticket),
        Local::Linear(op) => op.poll(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::Options;
    use crate::p2p::mem;
    use crate::settings::Idle;
    use crate::wait::WaitPolicy;
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
            let policy = WaitPolicy { spins: 16, progress: true, idle: Idle::Yield };
            let opts = Options { requested: algorithm, inter: Some(inter), verbose: 0, policy };
            let c = Comm::new(ep, r, n as c_int, 9, true, opts);
            let mut op = HierOp::start(&c, None).unwrap();
            while !op.poll(&c).unwrap() {
                std::thread::yield_now();
            }
            let t = c.topo().expect("layout found").clone();
            assert_eq!((c.algorithm(), c.inter_algorithm(), c.unusable()), (algorithm, inter, false));
            assert_eq!(c.segment().is_some(), t.local.len() > 1, "a device where ranks share a node");
            for k in 1..=40 {
                entered.fetch_add(1, SeqCst);
                if k % 2 == 0 {
                    c.hier_barrier(&t).unwrap();
                } else {
                    let mut op = HierOp::start(&c, None).unwrap();
                    while !op.poll(&c).unwrap() {
                        std::thread::yield_now();
                    }
                }
                assert!(entered.load(SeqCst) >= n * k, "rank {r} left barrier {k} early");
            }
            t.leaders.len()
        });
        assert!(nodes.iter().all(|&l| l == hosts.iter().collect::<std::collections::HashSet<_>>().len()));
    }

    #[test]
    fn two_nodes_of_two_ranks() {
        run(&["a", "a", "b", "b"], Algorithm::Counter, InterAlgorithm::Counter);
        run(&["a", "b", "a", "b"], Algorithm::Toggle, InterAlgorithm::Dissemination);
    }

    #[test]
    fn uneven_nodes_and_four_leaders() {
        run(&["a", "b", "b", "c"], Algorithm::Toggle, InterAlgorithm::Counter);
        run(&["a", "b", "c", "d"], Algorithm::Counter, InterAlgorithm::Dissemination);
    }
}
