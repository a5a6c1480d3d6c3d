//! The barriers a communicator runs, one module per route (`comm::Route`):
//! `device` (one node, shared memory), `hier` (spanning nodes: node-local
//! phases and the leaders' `inter` phase) and `linear` (point-to-point).
//! Each holds its route's blocking form and its non-blocking one (an
//! operation polled from MPI progress, for MPI_Ibarrier and the persistent
//! barrier). The route is dispatched here, once: `run` for a blocking
//! barrier, `Op` for one in flight. Before the ranks agree on a route, the
//! first barrier of any kind is the first exchange (`exchange`).

use std::ffi::c_int;

use crate::comm::{Comm, Route};
use crate::exchange::device::DeviceExchange;
use crate::p2p::P2p;

pub mod device;
pub mod hier;
pub mod inter;
pub mod linear;

/// A blocking barrier on the agreed `route`: runs it to its end, counts it,
/// and fails the communicator on an error (`Comm::fail`), a panic of
/// hwbarr's in the point-to-point routes included (`Comm::contained`), as
/// do `Op::start` and `Op::poll`. The device's barrier stays a plain call
/// on the fast path: a panic there is contained by the MPI_Barrier entry
/// point, which fails the communicator the same way (`ompi::module`).
#[inline(always)]
pub fn run<P: P2p>(c: &Comm<P>, route: Route) -> Result<(), c_int> {
    let r = match route {
        Route::Device(core) => device::barrier(c, core),
        Route::Hier(core) => c.contained(|| hier::barrier(c, core)),
        Route::Linear { .. } => c.contained(|| linear::barrier(c.p2p(), c.rank(), c.size())),
    };
    c.failing(r)?;
    c.count_served();
    Ok(())
}

/// A barrier in flight, entered and advanced without blocking.
pub enum Op<P: P2p> {
    /// One node, first barrier: the device exchange.
    First(Box<DeviceExchange<P>>),
    Device(device::Ticket),
    /// Spanning nodes (its first barrier too: the layout exchange).
    Hier(Box<hier::HierOp<P>>),
    Linear(linear::LinearOp<P>),
}

impl<P: P2p> Op<P> {
    /// Enters a barrier on `c`: the first exchange until the ranks agree
    /// (`tag`: the non-blocking collective tag of the call that started
    /// it, for its `Lookout`), then the agreed route's.
    pub fn start(c: &Comm<P>, tag: Option<c_int>) -> Result<Op<P>, c_int> {
        c.contained(|| Self::enter(c, tag))
    }

    fn enter(c: &Comm<P>, tag: Option<c_int>) -> Result<Op<P>, c_int> {
        Ok(match c.route() {
            None if c.is_multi_node() => Op::Hier(Box::new(hier::HierOp::first(c, c.lookout(tag))?)),
            None => Op::First(Box::new(device::first(c, c.lookout(tag))?)),
            Some(Route::Device(core)) => Op::Device(device::arrive(c, core)),
            Some(Route::Hier(core)) => Op::Hier(Box::new(hier::HierOp::start(c, core)?)),
            Some(Route::Linear { .. }) => {
                let all: Vec<c_int> = (0..c.size()).collect();
                Op::Linear(linear::LinearOp::start(c.p2p().clone(), &all, c.rank() as usize)?)
            }
        })
    }

    /// Advances without blocking; true when the barrier is over (a first
    /// exchange's outcome adopted).
    pub fn poll(&mut self, c: &Comm<P>) -> Result<bool, c_int> {
        c.contained(|| self.advance(c))
    }

    fn advance(&mut self, c: &Comm<P>) -> Result<bool, c_int> {
        match self {
            Op::First(x) => match x.poll()? {
                None => Ok(false),
                Some((agreed, seg)) => {
                    c.adopt_device(agreed, seg);
                    c.first_barrier_over();
                    Ok(true)
                }
            },
            Op::Device(t) => device::tested(c, *t),
            Op::Hier(h) => h.poll(c),
            Op::Linear(op) => op.poll(),
        }
    }
}
