//! coll/basic's linear barrier, the reference: every rank sends a zero-byte
//! message to rank 0, rank 0 receives n-1 of them, then sends n-1 releases.
//! Runs on the point-to-point transport (Open MPI's PML in the component).

use std::ffi::c_int;

use crate::p2p::{recv_signal, Flight, P2p, ANY_SOURCE};

/// The linear barrier on `p2p`'s communicator as `rank` of `size`.
pub fn barrier(p2p: &impl P2p, rank: c_int, size: c_int) -> Result<(), c_int> {
    if rank > 0 {
        p2p.send(&[], 0)?;
        return recv_signal(p2p, 0);
    }
    for _ in 1..size {
        recv_signal(p2p, ANY_SOURCE)?;
    }
    for q in 1..size {
        p2p.send(&[], q)?;
    }
    Ok(())
}

/// The linear barrier among `members` (ranks of `p2p`'s communicator) as
/// `members[me]`; `members[0]` gathers and releases. Serves a node's local
/// phase when its shared-memory device is unusable.
pub fn barrier_among(p2p: &impl P2p, members: &[c_int], me: usize) -> Result<(), c_int> {
    if me > 0 {
        p2p.send(&[], members[0])?;
        return recv_signal(p2p, members[0]);
    }
    for &q in &members[1..] {
        recv_signal(p2p, q)?;
    }
    for &q in &members[1..] {
        p2p.send(&[], q)?;
    }
    Ok(())
}

/// The linear barrier among `members` as a non-blocking operation, for the
/// engine (MPI_Ibarrier and the persistent barrier where there is no
/// device) and for a node's local phase (`hier`). Its messages pair up with
/// `barrier_among`'s: the same pairs, one message each way per barrier.
pub struct LinearOp<P: P2p> {
    flight: Flight<P>,
    /// The gatherer's releases, sent once every member has arrived.
    releases: Vec<c_int>,
}

impl<P: P2p> LinearOp<P> {
    /// Enters the barrier as `members[me]`.
    pub fn start(p2p: P, members: &[c_int], me: usize) -> Result<LinearOp<P>, c_int> {
        let mut flight = Flight::new(p2p);
        if members.len() < 2 {
            return Ok(LinearOp { flight, releases: Vec::new() });
        }
        if me == 0 {
            for &q in &members[1..] {
                flight.signal_from(q)?;
            }
            return Ok(LinearOp { flight, releases: members[1..].to_vec() });
        }
        // The release's receive first: once our arrival is out, a failure
        // of ours could no longer reach the gatherer as a notice in its place.
        flight.signal_from(members[0])?;
        flight.send(&[], members[0])?;
        Ok(LinearOp { flight, releases: Vec::new() })
    }

    /// Advances without blocking; true when the barrier is over.
    pub fn poll(&mut self) -> Result<bool, c_int> {
        if !self.flight.done()? {
            return Ok(false);
        }
        if self.releases.is_empty() {
            return Ok(true);
        }
        for q in std::mem::take(&mut self.releases) {
            self.flight.send(&[], q)?;
        }
        self.flight.done()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::mem;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Non-blocking and blocking linear barriers alternate, with a late
    /// rank each time: none leaves barrier k before every rank entered it,
    /// and the messages of consecutive barriers never pair up wrongly.
    #[test]
    fn non_blocking_and_blocking_linear_barriers_pair_up() {
        for n in [2usize, 3, 5] {
            let entered = Arc::new(AtomicUsize::new(0));
            let hosts: &'static [&'static str] = &["a", "a", "a", "a", "a"][..n];
            mem::run(mem::network(hosts), move |ep| {
                let me = ep.rank() as usize;
                let all: Vec<c_int> = (0..n as c_int).collect();
                for k in 1..=60 {
                    if me == k % n {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                    entered.fetch_add(1, SeqCst);
                    if k % 3 == 0 {
                        barrier_among(&ep, &all, me).unwrap();
                    } else {
                        let mut op = LinearOp::start(ep.clone(), &all, me).unwrap();
                        while !op.poll().unwrap() {
                            std::thread::yield_now();
                        }
                    }
                    assert!(entered.load(SeqCst) >= n * k, "rank {me} left barrier {k} early");
                }
            });
        }
    }
}
