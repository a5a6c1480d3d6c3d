//! `P2p` over an in-memory network, for unit tests of the protocols with
//! threads as ranks. Matching follows MPI's rules for one tag: a message
//! goes to the oldest posted receive that names its source (or any), else
//! it waits, in order, for the next such receive; sends complete at once
//! (eager).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use super::{is_failure, P2p, ANY_SOURCE};

/// An MPI error class for a message longer than its receive buffer.
pub const ERR_TRUNCATE: c_int = -15;

#[derive(Default)]
struct Net {
    /// Per destination: receives posted and not matched (source, id, words).
    posted: HashMap<c_int, Vec<(c_int, u64, usize)>>,
    /// Per destination: messages that found no receive (source, data).
    unexpected: HashMap<c_int, VecDeque<(c_int, Vec<u64>)>>,
    /// Matched receives' data, by id.
    arrived: HashMap<u64, Result<Vec<u64>, c_int>>,
    /// Per destination: sources of messages on another component's tag
    /// (`send_foreign`), never received.
    foreign: HashMap<c_int, Vec<c_int>>,
    /// A slow link (`hold`).
    held: Option<Held>,
    next_id: u64,
}

/// A slow link: what `link.0` sends to `link.1` waits here, in order,
/// until `release`.
struct Held {
    link: (c_int, c_int),
    msgs: Vec<Vec<u64>>,
}

impl Net {
    /// A message from `src` arrives at `dst`: it goes to the oldest posted
    /// receive that names its source, else it waits unexpected.
    fn arrive(&mut self, src: c_int, dst: c_int, data: Vec<u64>) {
        let posted = self.posted.entry(dst).or_default();
        match posted.iter().position(|&(s, _, _)| s == src || s == ANY_SOURCE) {
            Some(i) => {
                let (_, id, words) = posted.remove(i);
                self.arrived.insert(id, deliver(words, data));
            }
            None => self.unexpected.entry(dst).or_default().push_back((src, data)),
        }
    }
}

fn deliver(words: usize, data: Vec<u64>) -> Result<Vec<u64>, c_int> {
    if data.len() > words {
        return Err(ERR_TRUNCATE);
    }
    let mut buf = data;
    buf.resize(words, 0);
    Ok(buf)
}

/// One rank's endpoint of a network of `size` ranks.
#[derive(Clone)]
pub struct Mem {
    net: Arc<Mutex<Net>>,
    rank: c_int,
    host: String,
    fault: Arc<Fault>,
    /// The ranks it sent to or posted a receive from (`peers`).
    peers: Arc<Mutex<BTreeSet<c_int>>>,
}

/// Fault injection, as the component's test build does it: this rank's
/// `fail_at`-th operation (1-based; 0: none) fails and posts nothing, or
/// with `panics` panics instead (a bug of hwbarr's at that point);
/// `notice_panics`: the next failure notice it sends panics.
#[derive(Default)]
struct Fault {
    fail_at: u64,
    panics: bool,
    notice_panics: AtomicBool,
    ops: AtomicU64,
}

/// A network whose rank r runs on node `hosts[r]`.
pub fn network(hosts: &[&str]) -> Vec<Mem> {
    failing(hosts, -1, 0)
}

/// As `network`, with `rank`'s `n`-th operation failing (`ops` counts them).
pub fn failing(hosts: &[&str], rank: c_int, n: u64) -> Vec<Mem> {
    faulty(hosts, rank, n, false)
}

/// As `failing`, with a panic in place of the error.
pub fn panicking(hosts: &[&str], rank: c_int, n: u64) -> Vec<Mem> {
    faulty(hosts, rank, n, true)
}

fn faulty(hosts: &[&str], rank: c_int, n: u64, panics: bool) -> Vec<Mem> {
    let net = Arc::new(Mutex::new(Net::default()));
    hosts
        .iter()
        .enumerate()
        .map(|(r, h)| {
            let fail_at = if r as c_int == rank { n } else { 0 };
            let fault = Arc::new(Fault { fail_at, panics, ..Fault::default() });
            Mem { net: net.clone(), rank: r as c_int, host: h.to_string(), fault, peers: Arc::default() }
        })
        .collect()
}

pub enum Op {
    Sent(Option<Box<[u64]>>),
    Recv(u64),
}

impl Mem {
    pub fn rank(&self) -> c_int {
        self.rank
    }

    fn net(&self) -> std::sync::MutexGuard<'_, Net> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `dst` a message of another component's non-blocking barrier
    /// (as libnbc's MPI_Ibarrier would, on a rank not running hwbarr).
    pub fn send_foreign(&self, dst: c_int) {
        self.net().foreign.entry(dst).or_default().push(self.rank);
    }

    /// Makes the link from `src` to `dst` slow: what is sent on it arrives
    /// only at `release` (a sender preempted between two sends, say).
    pub fn hold(&self, src: c_int, dst: c_int) {
        self.net().held = Some(Held { link: (src, dst), msgs: Vec::new() });
    }

    /// The messages held on the slow link arrive, in order; the link is
    /// fast again.
    pub fn release(&self) {
        let mut net = self.net();
        if let Some(Held { link: (src, dst), msgs }) = net.held.take() {
            for data in msgs {
                net.arrive(src, dst, data);
            }
        }
    }

    /// Makes the next failure notice this rank sends panic (a second bug,
    /// after the failure that made it send notices).
    pub fn panic_at_next_notice(&self) {
        self.fault.notice_panics.store(true, SeqCst);
    }

    /// The ranks this one sent to or posted a receive from (a receive from
    /// any source aside), in order.
    pub fn peers(&self) -> Vec<c_int> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect()
    }

    /// Counts an operation with `peer`: an error if it is the one to fail.
    fn count_with(&self, peer: c_int) -> Result<(), c_int> {
        if peer != ANY_SOURCE {
            self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(peer);
        }
        self.count()
    }

    /// Operations this rank started (sends and receives, failed ones too).
    pub fn ops(&self) -> u64 {
        self.fault.ops.load(SeqCst)
    }

    /// Counts an operation: an error if it is the one to fail.
    fn count(&self) -> Result<(), c_int> {
        let k = self.fault.ops.fetch_add(1, SeqCst) + 1;
        if k == self.fault.fail_at {
            assert!(!self.fault.panics, "rank {}: injected panic at operation {k}", self.rank);
            return Err(INJECTED);
        }
        Ok(())
    }
}

/// The one tag of other components' messages (`send_foreign`).
const FOREIGN_TAG: c_int = -1000;

/// The error an injected fault returns.
pub const INJECTED: c_int = -99;

impl P2p for Mem {
    type Op = Op;

    fn isend(&self, data: Box<[u64]>, dst: c_int) -> Result<Op, c_int> {
        self.count_with(dst)?;
        if data.len() == 1 && is_failure(data[0]) && self.fault.notice_panics.swap(false, SeqCst) {
            panic!("rank {}: injected panic in a failure notice to rank {dst}", self.rank);
        }
        let mut net = self.net();
        match &mut net.held {
            Some(h) if h.link == (self.rank, dst) => h.msgs.push(data.to_vec()),
            _ => net.arrive(self.rank, dst, data.to_vec()),
        }
        Ok(Op::Sent(Some(data)))
    }

    fn irecv(&self, words: usize, src: c_int) -> Result<Op, c_int> {
        self.count_with(src)?;
        let mut net = self.net();
        let id = net.next_id;
        net.next_id += 1;
        let queue = net.unexpected.entry(self.rank).or_default();
        match queue.iter().position(|&(s, _)| s == src || src == ANY_SOURCE) {
            Some(i) => {
                let (_, data) = queue.remove(i).expect("found");
                net.arrived.insert(id, deliver(words, data));
            }
            None => net.posted.entry(self.rank).or_default().push((src, id, words)),
        }
        Ok(Op::Recv(id))
    }

    fn test(&self, op: &mut Op) -> Result<Option<Box<[u64]>>, c_int> {
        match op {
            Op::Sent(buf) => Ok(Some(buf.take().unwrap_or_default())),
            Op::Recv(id) => match self.net().arrived.remove(id) {
                None => Ok(None),
                Some(r) => r.map(|v| Some(v.into())),
            },
        }
    }

    fn send(&self, data: &[u64], dst: c_int) -> Result<(), c_int> {
        self.isend(data.into(), dst).map(drop)
    }

    fn recv(&self, buf: &mut [u64], src: c_int) -> Result<(), c_int> {
        let mut op = self.irecv(buf.len(), src)?;
        loop {
            if let Some(data) = self.test(&mut op)? {
                buf.copy_from_slice(&data);
                return Ok(());
            }
            self.progress();
        }
    }

    fn reserve_nbc_tag(&self) -> c_int {
        FOREIGN_TAG
    }

    fn probe(&self, tag: Option<c_int>) -> Option<(c_int, usize)> {
        let net = self.net();
        match tag {
            Some(_) => net.foreign.get(&self.rank)?.first().map(|&src| (src, 0)),
            None => net.unexpected.get(&self.rank)?.front().map(|(src, d)| (*src, d.len() * 8)),
        }
    }

    fn progress(&self) -> crate::wait::Turn {
        std::thread::yield_now();
        crate::wait::Turn::Idle
    }

    fn host(&self) -> String {
        self.host.clone()
    }

    fn name(&self) -> String {
        "in-memory network".into()
    }
}

/// Runs `f(endpoint)` for every endpoint on its own thread; the results by rank.
pub fn run<T: Send + 'static>(eps: Vec<Mem>, f: impl Fn(Mem) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let hs: Vec<_> = eps
        .into_iter()
        .map(|ep| {
            let f = f.clone();
            std::thread::spawn(move || f(ep))
        })
        .collect();
    hs.into_iter().map(|h| h.join().expect("rank panicked")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::Flight;

    #[test]
    fn messages_match_in_order_and_by_source() {
        let eps = network(&["a", "a", "a"]);
        let (a, b, c) = (eps[0].clone(), eps[1].clone(), eps[2].clone());
        b.send(&[1], 0).unwrap();
        c.send(&[2], 0).unwrap();
        b.send(&[3, 4], 0).unwrap();
        let mut f = Flight::new(a.clone());
        let from_c = f.recv(1, 2).unwrap();
        let first_b = f.recv(1, 1).unwrap();
        let second_b = f.recv(3, 1).unwrap();
        assert!(f.done().unwrap());
        assert_eq!((&*f.take(from_c), &*f.take(first_b), &*f.take(second_b)), (&[2][..], &[1][..], &[3, 4, 0][..]));
        // Posted before the send; too long a message is an error.
        let mut f = Flight::new(a.clone());
        let any = f.recv(1, ANY_SOURCE).unwrap();
        assert!(!f.done().unwrap());
        c.send(&[9], 0).unwrap();
        assert!(f.done().unwrap());
        assert_eq!(&*f.take(any), &[9]);
        f.recv(1, 1).unwrap();
        b.send(&[5, 6], 0).unwrap();
        assert_eq!(f.done(), Err(ERR_TRUNCATE));
    }

    /// A Flight judges failure notices on its receives only: sending one
    /// completes without error, receiving one fails the Flight.
    #[test]
    fn a_sent_failure_notice_is_not_the_senders_failure() {
        let eps = network(&["a", "a"]);
        let mut f = Flight::new(eps[0].clone());
        f.send(&[crate::p2p::FAILED], 1).unwrap();
        assert_eq!(f.done(), Ok(true));
        let mut g = Flight::new(eps[1].clone());
        g.recv(1, 0).unwrap();
        assert!(g.done().is_err());
    }
}
