//! The inter-node phase among node leaders, on Open MPI's point-to-point
//! engine. The patent's barrier control packets become zero-byte messages.
//!
//! - `Counter` (the patent's broadcast): every leader sends one message to
//!   every other leader and counts the N-1 it receives; one round, N-1
//!   messages out per leader.
//! - `Dissemination`: ⌈log2 N⌉ rounds; in round r leader i sends to
//!   i+2^r and receives from i-2^r (mod N). After the last round every
//!   leader has heard, transitively, from all.
//!
//! Consecutive barriers never confuse their messages: each ordered pair
//! of leaders carries at most one message per barrier (dissemination's
//! 2^r mod N are distinct), and MPI keeps a pair's messages in order.

use std::ffi::c_int;

use crate::p2p::{Flight, P2p};

pub use crate::settings::InterAlgorithm;

/// Leaders up to which `auto` uses the counter broadcast: one round of
/// N-1 messages beats ⌈log2 N⌉ rounds while N-1 sends cost less than the
/// extra rounds' latencies. The scale model in `make bench` puts the
/// crossover at 4 nodes, and two of three runs on 4 fake nodes measured
/// dissemination faster there (72.7 vs 80.0 and 85.0 vs 129.5 µs; the
/// first run had 72 vs 63).
pub const AUTO_COUNTER_MAX_NODES: usize = 3;

pub fn choose(requested: Option<InterAlgorithm>, nodes: usize) -> InterAlgorithm {
    requested.unwrap_or(if nodes <= AUTO_COUNTER_MAX_NODES {
        InterAlgorithm::Counter
    } else {
        InterAlgorithm::Dissemination
    })
}

/// The nodes (indexes among `nodes`) whose leaders leader `node` sends to
/// or hears from under `alg`, itself included, ascending: every node for
/// the counter broadcast; for dissemination those at ±2^r, at most
/// 2⌈log2 nodes⌉ + 1, which is all the layout exchange sends a leader
/// (`exchange::layout`).
pub fn partners(alg: InterAlgorithm, node: usize, nodes: usize) -> Vec<usize> {
    match alg {
        InterAlgorithm::Counter => (0..nodes).collect(),
        InterAlgorithm::Dissemination => {
            let mut v = vec![node];
            let mut step = 1;
            while step < nodes {
                v.extend([(node + step) % nodes, (node + nodes - step) % nodes]);
                step *= 2;
            }
            v.sort_unstable();
            v.dedup();
            v
        }
    }
}

/// Leader `node` of `leaders` (ranks in `flight`'s communicator) runs one
/// inter-node barrier, turning progress until it is over.
pub fn barrier<P: P2p>(flight: &mut Flight<P>, leaders: &[c_int], node: usize, alg: InterAlgorithm) -> Result<(), c_int> {
    let mut step = 1;
    while step < leaders.len() {
        post(flight, leaders, node, alg, step)?;
        flight.wait()?;
        match alg {
            InterAlgorithm::Counter => break,
            InterAlgorithm::Dissemination => step *= 2,
        }
    }
    Ok(())
}

/// Posts one round of leader `node`'s messages: all of them for the counter
/// broadcast, the round at distance `step` for dissemination. Blocking and
/// non-blocking barriers (`hier`) both post through here, so their messages
/// always pair up.
pub fn post<P: P2p>(flight: &mut Flight<P>, leaders: &[c_int], node: usize, alg: InterAlgorithm, step: usize) -> Result<(), c_int> {
    let n = leaders.len();
    // Every leader named here is a partner (`partners`), which the layout
    // exchange sent: a test fails on this if one is not.
    debug_assert!(partners(alg, node, n).iter().all(|&j| leaders[j] >= 0), "a partner unknown to leader {node}");
    match alg {
        InterAlgorithm::Counter => {
            for i in 1..n {
                flight.signal_from(leaders[(node + n - i) % n])?;
            }
            for i in 1..n {
                flight.send(&[], leaders[(node + i) % n])?;
            }
        }
        InterAlgorithm::Dissemination => {
            flight.signal_from(leaders[(node + n - step) % n])?;
            flight.send(&[], leaders[(node + step) % n])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::mem;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// `n` leaders run consecutive barriers, each knowing only its
    /// partners (the others `NO_LEADER`, as the layout exchange leaves
    /// them): none leaves barrier k before every leader entered it, and
    /// none talks to a leader it does not know (that would hang or err).
    fn leaders_meet(alg: InterAlgorithm, n: usize) {
        let entered = Arc::new(AtomicUsize::new(0));
        let hosts: Vec<String> = (0..n).map(|i| format!("node{i}")).collect();
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let eps = mem::network(&hosts);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            mem::run(eps, move |ep| {
                let node = ep.rank() as usize;
                let talks = partners(alg, node, n);
                let leaders: Vec<c_int> =
                    (0..n).map(|j| if talks.contains(&j) { j as c_int } else { crate::layout::NO_LEADER }).collect();
                let mut f = Flight::new(ep);
                for k in 1..=50 {
                    entered.fetch_add(1, SeqCst);
                    if node == k % n {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                    barrier(&mut f, &leaders, node, alg).unwrap();
                    assert!(entered.load(SeqCst) >= n * k, "left barrier {k} early");
                }
            });
            let _ = tx.send(());
        });
        rx.recv_timeout(std::time::Duration::from_secs(20)).expect("leaders finish (no hang, no panic)");
    }

    #[test]
    fn counter_among_four_leaders() {
        leaders_meet(InterAlgorithm::Counter, 4);
    }

    #[test]
    fn dissemination_among_leaders_that_know_their_partners_only() {
        for n in [2, 3, 4, 6, 8, 11] {
            leaders_meet(InterAlgorithm::Dissemination, n);
        }
    }

    /// `partners` is exactly whom a leader's barrier talks to (what the
    /// layout exchange sends it: one more would hang, one fewer is waste),
    /// read from the messages of one real barrier among 1 to 70 leaders
    /// that all know each other; sorted, and within 2⌈log2 n⌉ + 1.
    #[test]
    fn partners_are_whom_a_barrier_talks_to() {
        for alg in [InterAlgorithm::Dissemination, InterAlgorithm::Counter] {
            for n in 1..=70 {
                let hosts: Vec<String> = (0..n).map(|i| format!("node{i}")).collect();
                let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
                let leaders: Vec<c_int> = (0..n as c_int).collect();
                let talked = mem::run(mem::network(&hosts), move |ep| {
                    barrier(&mut Flight::new(ep.clone()), &leaders, ep.rank() as usize, alg).unwrap();
                    ep.peers()
                });
                for (node, talked) in talked.into_iter().enumerate() {
                    let p = partners(alg, node, n);
                    let others: Vec<c_int> = p.iter().filter(|&&j| j != node).map(|&j| j as c_int).collect();
                    assert_eq!(talked, others, "{alg} among {n}: leader {node}");
                    assert!(p.contains(&node) && p.windows(2).all(|w| w[0] < w[1]));
                    if alg == InterAlgorithm::Dissemination {
                        assert!(p.len() <= 2 * (usize::BITS - n.leading_zeros()) as usize + 1, "{n}: {p:?}");
                    }
                }
            }
        }
        assert_eq!(partners(InterAlgorithm::Dissemination, 0, 8), vec![0, 1, 2, 4, 6, 7]);
    }
}
