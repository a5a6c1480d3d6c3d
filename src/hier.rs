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
//! its own direct path (`ModuleState::hier_barrier`) once the layout is known
//! and nothing is queued. After an error the communicator's barriers stay
//! failed (`ModuleState::fail`): requests may be left posted, so peers
//! would otherwise match the wrong messages.

use std::ffi::c_int;

use crate::agree::Settings;
use crate::bootstrap::{Boot, Verdict};
use crate::settings::Algorithm;
use crate::inter::{self, InterAlgorithm};
use crate::p2p::pml::Pml;
use crate::p2p::Flight;
use crate::module::{ModuleState, Ticket};
use crate::topo::{Exchange, Topo};

/// A node-local meeting in progress.
enum Local {
    Device(Ticket),
    /// Linear among the node's ranks over point-to-point; `released`: the
    /// node leader has heard from all and sent the releases.
    Linear { flight: Flight<Pml>, released: bool },
}

/// The leaders' meeting in progress; `step` is dissemination's distance.
struct Leaders {
    flight: Flight<Pml>,
    alg: InterAlgorithm,
    step: usize,
}

enum Stage {
    Layout(Box<Exchange<Pml>>),
    Boot(Box<Boot<Pml>>),
    Gather(Local),
    Leaders(Leaders),
    Release(Local),
}

pub struct HierOp {
    stage: Stage,
}

impl HierOp {
    /// Enters a barrier on `st` (a communicator spanning nodes).
    pub fn start(st: &ModuleState) -> Result<HierOp, c_int> {
        let stage = match st.topo() {
            None => Stage::Layout(Box::new(Exchange::start(st.pml(), st.rank, st.size, st.settings())?)),
            Some(t) => Stage::Gather(local(st, t)?),
        };
        Ok(HierOp { stage })
    }

    /// Advances without blocking; true when the barrier is over.
    pub fn poll(&mut self, st: &ModuleState) -> Result<bool, c_int> {
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
                            Some(Boot::start(st.pml(), &t.local, t.me, settings)?)
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
                    if !local_done(st, t, l)? {
                        return Ok(false);
                    }
                    if t.is_leader() && t.leaders.len() > 1 {
                        let alg = st.inter_algorithm();
                        let mut g = Leaders { flight: Flight::new(st.pml()), alg, step: 1 };
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
                Stage::Release(l) => {
                    let t = st.topo().expect("layout known");
                    return local_done(st, t, l);
                }
            };
            self.stage = next;
        }
    }
}

/// Enters a node-local meeting.
fn local(st: &ModuleState, t: &Topo) -> Result<Local, c_int> {
    if t.local.len() < 2 {
        return Ok(Local::Linear { flight: Flight::new(st.pml()), released: true });
    }
    if let Some(seg) = st.segment() {
        return Ok(Local::Device(st.arrive(seg)));
    }
    // As `linear::barrier_among`: members send to the node leader and wait
    // for its release; the leader first hears from every member.
    let mut flight = Flight::new(st.pml());
    if t.is_leader() {
        for &q in &t.local[1..] {
            flight.signal_from(q)?;
        }
        Ok(Local::Linear { flight, released: false })
    } else {
        flight.send(&[], t.local[0])?;
        flight.signal_from(t.local[0])?;
        Ok(Local::Linear { flight, released: true })
    }
}

fn local_done(st: &ModuleState, t: &Topo, l: &mut Local) -> Result<bool, c_int> {
    match l {
        Local::Device(ticket) => Ok(st.released(st.segment().expect("device"), *ticket)),
        Local::Linear { flight, released } => {
            if !flight.done()? {
                return Ok(false);
            }
            if *released {
                return Ok(true);
            }
            for &q in &t.local[1..] {
                flight.send(&[], q)?;
            }
            *released = true;
            flight.done()
        }
    }
}
