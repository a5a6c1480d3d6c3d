//! Setting up a communicator's device on its first barrier, never before
//! (no cost at MPI_Init or communicator creation). The first of the ranks
//! sharing it (all of a one-node communicator, or one node's ranks) creates
//! the segment and offers it to every peer over point-to-point; each peer
//! maps it and answers with its status; the creator sends the verdict. Either
//! every rank uses the segment or none does. The exchange is itself a
//! barrier (rank 0 hears from every rank before anyone hears the verdict),
//! so it serves the first barrier call.
//!
//! The exchange is a non-blocking state machine (`poll`), so that a first
//! MPI_Ibarrier or MPI_Start can set the device up without blocking; the
//! blocking barrier just polls it to the end.

use std::collections::hash_map::RandomState;
use std::ffi::c_int;
use std::hash::{BuildHasher, Hasher};

use crate::device::{Offer, Segment};
use crate::linear::Flight;
use crate::ffi::{self, ompi_communicator_t as Comm};

const OK: u64 = 0;
const OFFER_WORDS: usize = 5;

/// A fresh token that ties a segment to this one exchange.
fn token() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// An errno-like code for a failure to attach (never 0).
fn code(e: &std::io::Error) -> u64 {
    e.raw_os_error().map(|c| c as u64).filter(|&c| c != 0).unwrap_or(u64::MAX)
}

enum Stage {
    /// Peer: waiting for rank 0's offer.
    Offer,
    /// Rank 0: offers out, acks coming in. Peer: ack out, verdict coming.
    Answers,
    /// Rank 0: verdicts out.
    Verdict,
    Done,
}

/// One rank's part of the exchange.
pub struct Boot {
    /// The ranks (in the communicator) sharing the device; the first creates it.
    members: Vec<c_int>,
    /// Our index in `members`.
    me: usize,
    flight: Flight,
    stage: Stage,
    offer: Box<[u64; OFFER_WORDS]>,
    answers: Vec<u64>,
    verdict: Box<[u64; 1]>,
    outcome: Option<Result<Segment, String>>,
}

impl Boot {
    /// Starts the exchange among `members` (ranks of `comm`; at least 2)
    /// as `members[me]`.
    pub fn start(comm: *mut Comm, members: &[c_int], me: usize) -> Result<Boot, c_int> {
        let n = members.len();
        let mut b = Boot {
            members: members.to_vec(),
            me,
            flight: Flight::new(comm),
            stage: Stage::Offer,
            offer: Box::new([0; OFFER_WORDS]),
            answers: vec![0; n],
            verdict: Box::new([0]),
            outcome: None,
        };
        if me == 0 {
            let created = Segment::create(n, token());
            *b.offer = match &created {
                Ok(seg) => {
                    let o = seg.offer().expect("creator holds the fd");
                    [OK, o.pid as u64, o.fd as u64, o.len, o.token]
                }
                Err(e) => [code(e), 0, 0, 0, 0],
            };
            b.outcome = Some(created.map_err(|e| format!("cannot create shared memory: {e}")));
            for q in 1..n {
                let peer = b.members[q];
                b.flight.isend(&b.offer[..], peer)?;
                b.flight.irecv(&mut b.answers[q..q + 1], peer)?;
            }
            b.stage = Stage::Answers;
        } else {
            b.flight.irecv(&mut b.offer[..], members[0])?;
        }
        Ok(b)
    }

    /// Advances the exchange without blocking. `Ok(None)`: not finished.
    /// `Ok(Some(..))`: the agreed outcome, the segment or why not. `Err`: an
    /// MPI error code (communication failed).
    pub fn poll(&mut self) -> Result<Option<Result<Segment, String>>, c_int> {
        loop {
            if !self.flight.done()? {
                return Ok(None);
            }
            match self.stage {
                Stage::Offer => {
                    // Peer: the offer arrived; map it and answer.
                    let w = &self.offer;
                    let attached = if w[0] == OK {
                        let offer = Offer { pid: w[1] as u32, fd: w[2] as i32, len: w[3], token: w[4] };
                        Segment::attach(&offer, self.members.len()).map_err(|e| (code(&e), e.to_string()))
                    } else {
                        Err((OK + 1, "rank 0 could not create the segment".into()))
                    };
                    self.answers[0] = match &attached {
                        Ok(_) => OK,
                        Err((c, _)) => *c,
                    };
                    self.outcome = Some(attached.map_err(|(_, why)| why));
                    let creator = self.members[0];
                    self.flight.isend(&self.answers[..1], creator)?;
                    self.flight.irecv(&mut self.verdict[..], creator)?;
                    self.stage = Stage::Answers;
                }
                Stage::Answers if self.me == 0 => {
                    let mut verdict = self.outcome.take().expect("creator outcome");
                    for q in 1..self.members.len() {
                        let st = self.answers[q];
                        if st != OK && verdict.is_ok() {
                            let e = std::io::Error::from_raw_os_error(st as i32);
                            verdict = Err(format!("rank {} cannot map the segment: {e}", self.members[q]));
                        }
                    }
                    self.verdict[0] = if verdict.is_ok() { OK } else { 1 };
                    self.outcome = Some(verdict);
                    for q in 1..self.members.len() {
                        let peer = self.members[q];
                        self.flight.isend(&self.verdict[..], peer)?;
                    }
                    self.stage = Stage::Verdict;
                }
                Stage::Answers | Stage::Verdict => {
                    self.stage = Stage::Done;
                    let out = self.outcome.take().expect("outcome");
                    return Ok(Some(match (out, self.verdict[0]) {
                        (Ok(mut seg), OK) => {
                            seg.seal();
                            Ok(seg)
                        }
                        (Err(why), _) => Err(why),
                        (Ok(_), _) => Err("a peer could not map the segment".into()),
                    }));
                }
                Stage::Done => return Err(ffi::ERROR),
            }
        }
    }
}

impl Drop for Boot {
    fn drop(&mut self) {
        // Only on an error path (the normal path ends with none in flight):
        // requests may still write into our buffers, and a peer may never
        // answer, so neither wait nor free them: leak the buffers.
        if !self.flight.is_empty() {
            std::mem::forget(std::mem::take(&mut self.answers));
            std::mem::forget(std::mem::replace(&mut self.offer, Box::new([0; OFFER_WORDS])));
            std::mem::forget(std::mem::replace(&mut self.verdict, Box::new([0])));
        }
    }
}
