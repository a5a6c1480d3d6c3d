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

    /// Four leaders run consecutive barriers: none leaves barrier k before
    /// every leader entered it.
    fn leaders_meet(alg: InterAlgorithm) {
        let entered = Arc::new(AtomicUsize::new(0));
        mem::run(mem::network(&["a", "b", "c", "d"]), move |ep| {
            let node = ep.rank() as usize;
            let mut f = Flight::new(ep);
            for k in 1..=50 {
                entered.fetch_add(1, SeqCst);
                if node == k % 4 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                barrier(&mut f, &[0, 1, 2, 3], node, alg).unwrap();
                assert!(entered.load(SeqCst) >= 4 * k, "left barrier {k} early");
            }
        });
    }

    #[test]
    fn counter_among_four_leaders() {
        leaders_meet(InterAlgorithm::Counter);
    }

    #[test]
    fn dissemination_among_four_leaders() {
        leaders_meet(InterAlgorithm::Dissemination);
    }
}
