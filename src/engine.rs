//! The queue of a communicator's barriers in flight: MPI_Ibarrier, the
//! persistent barrier, and a blocking MPI_Barrier that cannot take the
//! direct path (the first one, which runs the first exchange; anything
//! issued while non-blocking ones are outstanding).
//!
//! The head operation is entered as soon as it is issued — that is the
//! point of the DMA-counter design: once entered, the peers' arrivals
//! complete it, and the entering CPU is free. A rank cannot hold two
//! entries on the device (its wire would toggle back), so the next
//! operation enters when the head is released. Completion is noticed when
//! the caller advances the queue (`advance`, from Open MPI's progress in
//! the component: `ompi::progress`). No thread, and nothing runs while the
//! application computes.
//!
//! Free of Open MPI: a request is any handle `R` the caller completes
//! (`ompi::request` passes Open MPI's), so unit tests drive the queue over
//! the in-memory transport.

use std::collections::VecDeque;
use std::ffi::c_int;

use crate::barrier::Op;
use crate::comm::{Comm, Route};
use crate::p2p::{P2p, SUCCESS};

/// One barrier issued on the communicator.
struct Entry<R> {
    id: u64,
    /// Its request; None for a blocking MPI_Barrier waiting for its turn.
    req: Option<R>,
    /// The non-blocking collective tag this barrier took, for the lookout
    /// of a first exchange; None for a blocking MPI_Barrier.
    tag: Option<c_int>,
}

/// Where a queued blocking barrier stands (`Queue::outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still queued or in flight.
    Pending,
    /// Over, with this code.
    Finished(c_int),
    /// Its turn has come on a communicator that runs hwbarr's linear
    /// barrier: it has left the queue, and its caller runs the blocking
    /// linear barrier, as every peer that called MPI_Barrier with nothing
    /// queued does.
    LinearTurn,
}

/// A communicator's queue of barriers in flight; `R` is the request handle.
pub struct Queue<P: P2p, R> {
    ops: VecDeque<Entry<R>>,
    head: Option<Op<P>>,
    next_id: u64,
    /// Operations with id below this are finished (they finish in order).
    finished: u64,
    /// Errors of finished blocking operations, by id (rare).
    errors: Vec<(u64, c_int)>,
}

impl<P: P2p, R> Default for Queue<P, R> {
    fn default() -> Self {
        Queue { ops: VecDeque::new(), head: None, next_id: 0, finished: 0, errors: Vec::new() }
    }
}

impl<P: P2p, R: Copy + PartialEq> Queue<P, R> {
    /// Queues a barrier (`req` None: a blocking one); its id.
    pub fn push(&mut self, req: Option<R>, tag: Option<c_int>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.ops.push_back(Entry { id, req, tag });
        id
    }

    /// Queues a barrier of `req` already entered as `op` (taken from the
    /// express lane, `crate::express`): the queue must be empty, as it is
    /// while the lane holds a barrier.
    pub fn push_entered(&mut self, req: R, op: Op<P>) {
        assert!(self.ops.is_empty() && self.head.is_none(), "an entered barrier joins an empty queue");
        self.push(Some(req), None);
        self.head = Some(op);
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether `req`'s barrier is still queued or in flight.
    pub fn holds(&self, req: R) -> bool {
        self.ops.iter().any(|e| e.req == Some(req))
    }

    /// How many operations have finished.
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// Enters and completes operations from the head of the queue for as
    /// long as they are released; `complete` is called with each request
    /// that finishes and its code.
    pub fn advance(&mut self, c: &Comm<P>, complete: &mut impl FnMut(R, c_int)) {
        while let Some(front) = self.ops.front() {
            if self.head.is_none() {
                if let Some(rc) = c.broken() {
                    self.finish(c, rc, complete);
                    continue;
                }
                if front.req.is_none() && matches!(c.route(), Some(Route::Linear { .. })) {
                    // A blocking MPI_Barrier on a linear route: its caller
                    // runs the blocking linear barrier (`outcome`).
                    break;
                }
                match Op::start(c, front.tag) {
                    Ok(op) => self.head = Some(op),
                    Err(rc) => {
                        c.fail(rc);
                        self.finish(c, rc, complete);
                        continue;
                    }
                }
            }
            match self.head.as_mut().expect("entered").poll(c) {
                Ok(false) => match c.broken() {
                    // Failed meanwhile (the communicator revoked, a failure
                    // notice): what the head waits for may never come.
                    // Dropped, a point-to-point step leaves its requests
                    // posted (`p2p::pml::Op`).
                    Some(rc) => self.finish(c, rc, complete),
                    None => break,
                },
                Ok(true) => self.finish(c, SUCCESS, complete),
                Err(rc) => {
                    // Our own exchanges failed (or a peer's did, and told
                    // us): peers may be out of step with us from here on.
                    c.fail(rc);
                    self.finish(c, rc, complete)
                }
            }
        }
    }

    /// The head operation is over (with `rc`): complete its request.
    fn finish(&mut self, c: &Comm<P>, rc: c_int, complete: &mut impl FnMut(R, c_int)) {
        let e = self.ops.pop_front().expect("head");
        self.head = None;
        self.finished = e.id + 1;
        if rc == SUCCESS {
            c.count_served();
        }
        match e.req {
            Some(r) => complete(r, rc),
            None if rc != SUCCESS => self.errors.push((e.id, rc)),
            None => {}
        }
    }

    /// Where the blocking barrier `id` stands (after `advance`).
    pub fn outcome(&mut self, c: &Comm<P>, id: u64) -> Outcome {
        if self.finished > id {
            let rc = self.errors.iter().position(|&(i, _)| i == id).map(|k| self.errors.swap_remove(k).1);
            return Outcome::Finished(rc.unwrap_or(SUCCESS));
        }
        let turn = self.head.is_none() && self.ops.front().is_some_and(|e| e.id == id);
        if turn && matches!(c.route(), Some(Route::Linear { .. })) {
            self.ops.pop_front();
            self.finished = id + 1;
            return Outcome::LinearTurn;
        }
        Outcome::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::Options;
    use crate::p2p::mem;
    use crate::settings::Algorithm;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    const OPS: usize = 12;

    /// Every rank queues `OPS` barriers one after another — requests, and
    /// every third one a blocking MPI_Barrier waiting for its turn — while
    /// it advances the queue: the requests complete in order, each only after every rank
    /// queued it, the first one being the first exchange; a blocking entry
    /// finishes, or (linear route) is handed to its caller in its turn.
    fn queue_on(hosts: &'static [&'static str], algorithm: Algorithm) {
        let n = hosts.len();
        let queued: Arc<Vec<AtomicUsize>> = Arc::new((0..OPS).map(|_| AtomicUsize::new(0)).collect());
        mem::run(mem::network(hosts), move |ep| {
            let r = ep.rank();
            let opts = Options::for_tests(algorithm, None);
            let multi = hosts.iter().any(|h| *h != hosts[0]);
            let c = Comm::new(ep, r, n as c_int, 3, multi, opts);
            let mut q: Queue<mem::Mem, usize> = Queue::default();
            let mut ids = Vec::new();
            let mut done: Vec<usize> = Vec::new();
            let mut next = 0;
            while next < OPS {
                // Queue the next barrier (rank k mod n late to barrier k),
                // while the earlier ones are in flight.
                let k = ids.len();
                if k < OPS {
                    if k % n == r as usize {
                        std::thread::sleep(std::time::Duration::from_micros(300));
                    }
                    queued[k].fetch_add(1, SeqCst);
                    let blocking = k % 3 == 2;
                    ids.push((k, blocking, q.push((!blocking).then_some(k), Some(-1000))));
                }
                q.advance(&c, &mut |k, rc| {
                    assert_eq!(rc, SUCCESS, "rank {r}: request {k}");
                    assert_eq!(queued[k].load(SeqCst), n, "rank {r} left barrier {k} before every rank queued it");
                    done.push(k);
                });
                let (k, blocking, id) = ids[next];
                let over = if blocking {
                    match q.outcome(&c, id) {
                        Outcome::Pending => false,
                        Outcome::Finished(rc) => rc == SUCCESS || panic!("rank {r}: barrier {k} failed"),
                        Outcome::LinearTurn => crate::barrier::run(&c, c.route().unwrap()).is_ok(),
                    }
                } else {
                    done.contains(&k)
                };
                if over {
                    assert_eq!(queued[k].load(SeqCst), n, "rank {r} left barrier {k} before every rank queued it");
                    next += 1;
                } else {
                    std::thread::yield_now();
                }
            }
            let requests: Vec<usize> = (0..OPS).filter(|k| k % 3 != 2).collect();
            assert_eq!(done, requests, "rank {r}: requests complete in order");
            assert!(q.is_empty() && c.route().is_some());
            if let Some(core) = crate::comm::Core::of(algorithm) {
                let routes = [crate::comm::Route::Device(core), crate::comm::Route::Hier(core)];
                assert!(routes.contains(&c.route().unwrap()), "rank {r}: {:?}", c.route());
            }
        });
    }

    /// Open MPI revokes the communicator's collectives (fault tolerance)
    /// while every rank but the last has a barrier queued that the last
    /// never enters: the ranks `told` (those whose Open MPI learned) end it
    /// with the revocation's error, and so do the ranks that only share a
    /// device with one told (its failure word), where a barrier that stayed
    /// queued would wait for ever.
    fn revoked_on(hosts: &'static [&'static str], algorithm: Algorithm, told: &'static [c_int]) {
        const PROC_FAILED: c_int = 75;
        let n = hosts.len();
        let phase = Arc::new(std::sync::Barrier::new(n));
        let queued = Arc::new(std::sync::Barrier::new(n - 1));
        let over = Arc::new(AtomicUsize::new(0));
        mem::run(mem::network(hosts), move |ep| {
            let r = ep.rank();
            let multi = hosts.iter().any(|h| *h != hosts[0]);
            let c = Comm::new(ep, r, n as c_int, 3, multi, Options::for_tests(algorithm, None));
            let mut q: Queue<mem::Mem, usize> = Queue::default();
            let mut ended = None;
            q.push(Some(0), Some(-1000));
            while ended.is_none() {
                q.advance(&c, &mut |_, rc| ended = Some(rc));
                std::thread::yield_now();
            }
            assert_eq!(ended, Some(SUCCESS), "rank {r}: the first barrier");
            phase.wait();
            if r as usize == n - 1 {
                // Alive, never entering, until the others are done (or
                // one of them failed its checks and will never be).
                let t0 = std::time::Instant::now();
                while over.load(SeqCst) < n - 1 && t0.elapsed() < std::time::Duration::from_secs(30) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                return;
            }
            ended = None;
            q.push(Some(1), None);
            for _ in 0..1000 {
                q.advance(&c, &mut |_, rc| ended = Some(rc));
            }
            assert_eq!(ended, None, "rank {r}: a barrier the last rank never entered");
            queued.wait();
            if told.contains(&r) {
                c.revoked(PROC_FAILED);
            }
            let t0 = std::time::Instant::now();
            while ended.is_none() && t0.elapsed() < std::time::Duration::from_secs(10) {
                q.advance(&c, &mut |_, rc| ended = Some(rc));
                std::thread::yield_now();
            }
            assert_eq!(ended, Some(PROC_FAILED), "rank {r} ({algorithm:?}, told: {told:?})");
            assert_eq!(c.broken(), Some(PROC_FAILED));
            assert!(q.is_empty());
            over.fetch_add(1, SeqCst);
        });
    }

    #[test]
    fn a_revocation_ends_the_queued_barriers_with_its_error() {
        revoked_on(&["a", "a", "a"], Algorithm::Counter, &[0]);
        revoked_on(&["a", "a", "a"], Algorithm::Toggle, &[1]);
        revoked_on(&["a", "a", "a", "a"], Algorithm::Polled, &[2]);
        revoked_on(&["a", "a", "a"], Algorithm::Line, &[0]);
        // No device: each rank learns from Open MPI itself.
        revoked_on(&["a", "a", "a"], Algorithm::Linear, &[0, 1]);
        // Across nodes, the leader of the node with two ranks told.
        revoked_on(&["a", "a", "b"], Algorithm::Counter, &[0]);
    }

    #[test]
    fn a_queue_of_barriers_completes_in_order_on_every_route() {
        queue_on(&["a", "a", "a"], Algorithm::Counter);
        queue_on(&["a", "a", "a"], Algorithm::Toggle);
        queue_on(&["a", "a", "a"], Algorithm::Linear);
        queue_on(&["a", "a", "a", "a", "a"], Algorithm::Polled);
        queue_on(&["a", "b", "a", "b"], Algorithm::Counter);
    }
}
