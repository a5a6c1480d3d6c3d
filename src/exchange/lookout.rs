//! While a communicator's first exchange waits: signs that it never will
//! complete, so that it fails with a message instead of hanging.
//!
//! - A peer whose barrier is not hwbarr's (hwbarr not selected there) and
//!   whose first barrier is non-blocking runs libnbc's MPI_Ibarrier, on the
//!   tag it took for that call from the communicator's counter, and never
//!   sends hwbarr's messages. hwbarr takes a tag from the same counter
//!   wherever libnbc would (each MPI_Ibarrier, each persistent init:
//!   `engine`), so its ranks stay in step with such a peer, and none
//!   of them ever sends on the tags it takes. The first exchange looks for
//!   a message on the tag of the call that started it: its sender runs
//!   another barrier. libnbc's first round sends at once to the next rank,
//!   so some hwbarr rank sees one whenever the ranks are mixed.
//! - A failure notice (`FAILED`, 8 bytes, the only message of that
//!   size on hwbarr's tag) waiting unreceived: a rank failed, for instance
//!   because it saw such a peer, and told us before we expected anything
//!   from it. Notices reach only the receives that expect them otherwise.
//!   A notice from a rank whose first barrier was over (`FAILED_LATER`) is
//!   for a later barrier: rank 0 had heard from every rank, and sends each
//!   its answer (or a notice where a send fails), so the lookout takes the
//!   notice, the exchange completes, and the communicator fails when its
//!   first barrier is over (`Comm::first_barrier_over`), as the receive
//!   that would have taken the notice in the next barrier would have made
//!   it.
//!
//! What it cannot see (a peer of another barrier that never sends to a
//! hwbarr rank, as tuned's barrier on 3 ranks with rank 0 outside hwbarr)
//! still hangs, as MPI allows; after `Stall::after` the waiting rank says
//! whom it waits for (once per process), so that the hang has a name.
//!
//! Looking costs two MPI_Iprobe, so it is done once every `EVERY` polls.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::exchange::words;
use crate::ompi::report::{self, Topic};
use crate::p2p::{Flight, P2p, ERROR, FAILED, FAILED_LATER};

/// Polls between two looks.
const EVERY: u32 = 16;

/// Whether this process has said that a first exchange waits long: once is
/// enough to name a hang, and a job of many communicators or threads
/// would repeat it.
static STALL_SAID: AtomicBool = AtomicBool::new(false);

/// When a rank waiting in a first exchange says so, and who it is.
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    /// How long it waits before it says so (`coll_hwbarr_stall_notice`).
    pub after: Duration,
    /// Its rank in the communicator, and the communicator's id.
    pub rank: c_int,
    pub cid: u32,
}

pub struct Lookout {
    /// The tag a peer's libnbc barrier of this call would use: the one
    /// this rank took for it (None for a blocking MPI_Barrier, which meets
    /// tuned's on hwbarr's own tag instead: `words::greeting`).
    foreign: Option<c_int>,
    polls: u32,
    /// None: never say that the exchange waits long.
    stall: Option<Stall>,
    since: Instant,
    /// Set once it took a notice for a later barrier (`FAILED_LATER`).
    later: Arc<AtomicBool>,
}

impl Lookout {
    /// For the first exchange of a barrier call that took `foreign` as its
    /// non-blocking collective tag (`engine`); `stall`: when to say that
    /// it waits long.
    pub fn new(foreign: Option<c_int>, stall: Option<Stall>) -> Lookout {
        Lookout { foreign, polls: 0, stall, since: Instant::now(), later: Arc::default() }
    }

    /// The same, setting `later` when it takes a notice for a later barrier
    /// (the communicator's: `Comm::lookout`).
    pub fn telling(self, later: Arc<AtomicBool>) -> Lookout {
        Lookout { later, ..self }
    }

    /// The line that says whom the exchange in `flight` still waits for,
    /// once it has waited `stall.after` (then None again: one per lookout).
    fn stalled<P: P2p>(&mut self, flight: &Flight<P>) -> Option<String> {
        let s = self.stall.filter(|s| self.since.elapsed() >= s.after)?;
        self.stall = None;
        let awaited = flight.awaited();
        let whom = match awaited.as_slice() {
            [] => "its peers".to_string(),
            [q] => format!("rank {q}"),
            qs if qs.len() <= 8 => format!("ranks {}", list(qs)),
            qs => format!("ranks {} and {} more", list(&qs[..8]), qs.len() - 8),
        };
        Some(format!(
            "rank {} of communicator '{}' (cid {}) has waited {} s in the communicator's first barrier for {whom} \
             to take part in hwbarr's setup exchange",
            s.rank,
            flight.p2p().name(),
            s.cid,
            s.after.as_secs_f64()
        ))
    }

    /// An error (after saying why, for a peer of another barrier) when the
    /// exchange, whose operations `flight` holds and which was not done a
    /// moment ago, cannot complete.
    pub fn check<P: P2p>(&mut self, flight: &mut Flight<P>) -> Result<(), c_int> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls % EVERY != 1 {
            return Ok(());
        }
        if let Some(line) = self.stalled(flight) {
            if !STALL_SAID.swap(true, Relaxed) {
                report::warn(Topic::Stalled, &line);
            }
        }
        let p2p = flight.p2p();
        if let Some((peer, _)) = self.foreign.and_then(|tag| p2p.probe(Some(tag))) {
            report::warn(Topic::NotHwbarr, &words::stranger(peer));
            return Err(ERROR);
        }
        match p2p.probe(None) {
            // A notice, unless our last receives matched meanwhile (the
            // probe turns progress): then it is for a later barrier, which
            // a peer that already left this one failed in.
            Some((src, bytes)) if bytes == std::mem::size_of_val(&FAILED) => match flight.done()? {
                true => Ok(()),
                false => self.take_notice(flight.p2p(), src),
            },
            _ => Ok(()),
        }
    }

    /// Receives the notice from `src` that a probe found, which no receive
    /// of ours names (it would have matched): an error, unless its sender's
    /// first barrier was over (see the module's doc).
    fn take_notice<P: P2p>(&mut self, p2p: &P, src: c_int) -> Result<(), c_int> {
        let mut w = [0u64];
        p2p.recv(&mut w, src)?;
        if w[0] != FAILED_LATER {
            return Err(ERROR);
        }
        self.later.store(true, Relaxed);
        Ok(())
    }
}

fn list(ranks: &[c_int]) -> String {
    ranks.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::mem;

    /// Rank 1 waits for rank 0's last message of this exchange; rank 0,
    /// past it, fails its next barrier and sends a notice. Both arrive
    /// between rank 1's look at its receives and its probe (a peer's
    /// thread, or the probe's own progress): the exchange is over, not
    /// failed. A notice with a receive still waiting fails it.
    #[test]
    fn a_notice_behind_the_awaited_message_is_for_a_later_barrier() {
        for awaited_arrives in [true, false] {
            let net = mem::network(&["a", "a", "a"]);
            let mut flight = Flight::new(net[1].clone());
            flight.recv(2, 0).unwrap();
            assert!(!flight.done().unwrap());
            if awaited_arrives {
                net[0].send(&[1, 2], 1).unwrap();
                net[0].send(&[FAILED], 1).unwrap();
            } else {
                // Rank 2, which we do not wait on, failed and told us.
                net[2].send(&[FAILED], 1).unwrap();
            }
            let r = Lookout::new(None, None).check(&mut flight);
            assert_eq!(r.is_ok(), awaited_arrives, "awaited message arrived: {awaited_arrives}");
            assert_eq!(flight.done(), if awaited_arrives { Ok(true) } else { Ok(false) });
        }
    }

    /// Rank 1 waits for rank 0's last message of this exchange; rank 2,
    /// whose first barrier is over (rank 0 answered it first), fails its
    /// next barrier and tells us before rank 0's message to us arrives.
    /// The exchange goes on: the lookout takes the notice and says so; a
    /// notice of a rank still in its first barrier fails the exchange.
    #[test]
    fn a_notice_of_a_rank_past_its_first_barrier_is_for_the_next_one() {
        for (notice, fails) in [(FAILED_LATER, false), (FAILED, true)] {
            let net = mem::network(&["a", "a", "a"]);
            let mut flight = Flight::new(net[1].clone());
            flight.recv(2, 0).unwrap();
            net[2].send(&[notice], 1).unwrap();
            let later = Arc::new(AtomicBool::new(false));
            let mut lookout = Lookout::new(None, None).telling(later.clone());
            assert_eq!(lookout.check(&mut flight).is_err(), fails, "notice {notice:#x}");
            assert_eq!(net[1].probe(None), None, "the notice is taken");
            assert_eq!(later.load(Relaxed), !fails);
            if !fails {
                net[0].send(&[1, 2], 1).unwrap();
                assert_eq!(flight.done(), Ok(true), "the exchange completes");
            }
        }
    }

    /// The line of a long wait names the ranks whose messages have not
    /// come, once they are overdue, and only once.
    #[test]
    fn a_long_wait_names_whom_it_waits_for() {
        let net = mem::network(&["a"; 12]);
        let mut flight = Flight::new(net[0].clone());
        for q in 1..12 {
            flight.recv(1, q).unwrap();
        }
        net[3].send(&[7], 0).unwrap();
        assert!(!flight.done().unwrap());
        let stall = |secs| Some(Stall { after: Duration::from_secs(secs), rank: 0, cid: 5 });
        assert_eq!(Lookout::new(None, stall(3600)).stalled(&flight), None, "not overdue");
        let mut l = Lookout::new(None, stall(0));
        let line = l.stalled(&flight).expect("overdue");
        assert!(
            line.starts_with("rank 0 of communicator 'in-memory network' (cid 5) has waited 0 s")
                && line.contains("for ranks 1, 2, 4, 5, 6, 7, 8, 9 and 2 more to take part"),
            "{line}"
        );
        assert_eq!(l.stalled(&flight), None, "said once");
        let mut peer = Flight::new(net[1].clone());
        peer.recv(1, 0).unwrap();
        assert!(Lookout::new(None, stall(0)).stalled(&peer).unwrap().contains("for rank 0 to take part"));
    }
}
