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
//!
//! Every member takes part, whatever its algorithm (`linear` too), and
//! the messages carry each rank's settings (`agree`): rank 0's algorithm is
//! the one every member runs, and rank 0 names any member that differed.

use std::collections::hash_map::RandomState;
use std::ffi::c_int;
use std::hash::{BuildHasher, Hasher};

use crate::agree::{self, Greeting, Settings, SETTINGS_WORDS};
use crate::device::{Offer, Segment};
use crate::linear::Flight;
use crate::ffi::{self, ompi_communicator_t as Comm};
use crate::settings::Algorithm;

const OK: u64 = 0;
/// Offer status: rank 0 runs `linear`, so no segment (its peers follow).
const NO_SEGMENT: u64 = u64::MAX - 1;
/// Answer status: another protocol version.
const OTHER_VERSION: u64 = u64::MAX - 2;
/// hello, status, pid, fd, len, token, settings.
const OFFER_WORDS: usize = 6 + SETTINGS_WORDS;
/// hello, status, settings.
const ANSWER_WORDS: usize = 2 + SETTINGS_WORDS;
/// hello, verdict.
const VERDICT_WORDS: usize = 2;
const VERDICT_DEVICE: u64 = 0;
const VERDICT_FALLBACK: u64 = 1;
const VERDICT_LINEAR: u64 = 2;

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

/// What the exchange decided, the same on every member.
pub enum Verdict {
    /// Every member mapped the segment.
    Device(Segment),
    /// No device (why): the component below serves.
    NoDevice(String),
    /// Rank 0 runs `linear`: no device, and every member runs linear.
    Linear,
}

/// The agreed outcome of the exchange.
pub struct Agreed {
    pub verdict: Verdict,
    /// Rank 0's algorithm, which every member now runs.
    pub algorithm: Algorithm,
    /// Rank 0 only: the members' settings that differed from its own.
    pub disagreement: Option<String>,
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
    settings: Settings,
    flight: Flight,
    stage: Stage,
    offer: Box<[u64; OFFER_WORDS]>,
    answers: Vec<[u64; ANSWER_WORDS]>,
    verdict: Box<[u64; VERDICT_WORDS]>,
    /// Rank 0's segment, or our mapping of it, or why not.
    outcome: Option<Result<Segment, String>>,
    /// Peer: rank 0's settings.
    chosen: Algorithm,
    disagreement: Option<String>,
}

impl Boot {
    /// Starts the exchange among `members` (ranks of `comm`; at least 2)
    /// as `members[me]`, with our `settings` (rank 0's win).
    pub fn start(comm: *mut Comm, members: &[c_int], me: usize, settings: Settings) -> Result<Boot, c_int> {
        let n = members.len();
        let mut b = Boot {
            members: members.to_vec(),
            me,
            settings,
            flight: Flight::new(comm),
            stage: Stage::Offer,
            offer: Box::new([0; OFFER_WORDS]),
            answers: vec![[0; ANSWER_WORDS]; n],
            verdict: Box::new([0; VERDICT_WORDS]),
            outcome: None,
            chosen: settings.algorithm,
            disagreement: None,
        };
        if me == 0 {
            let [s0, s1] = settings.words();
            if settings.algorithm == Algorithm::Linear {
                *b.offer = [agree::hello(), NO_SEGMENT, 0, 0, 0, 0, s0, s1];
                b.outcome = Some(Err(String::new()));
            } else {
                let created = Segment::create(n, token());
                *b.offer = match &created {
                    Ok(seg) => {
                        let o = seg.offer().expect("creator holds the fd");
                        [agree::hello(), OK, o.pid as u64, o.fd as u64, o.len, o.token, s0, s1]
                    }
                    Err(e) => [agree::hello(), code(e), 0, 0, 0, 0, s0, s1],
                };
                b.outcome = Some(created.map_err(|e| format!("cannot create shared memory: {e}")));
            }
            for q in 1..n {
                let peer = b.members[q];
                b.flight.isend(&b.offer[..], peer)?;
                b.flight.irecv(&mut b.answers[q][..], peer)?;
            }
            b.stage = Stage::Answers;
        } else {
            b.flight.irecv(&mut b.offer[..], members[0])?;
        }
        Ok(b)
    }

    /// Peer: the offer arrived; adopt rank 0's settings, map the segment if
    /// there is one, and answer.
    fn answer(&mut self) -> Result<(), c_int> {
        let w = *self.offer;
        let creator = self.members[0];
        let mut status = OK;
        match agree::greeting(w[0]) {
            Greeting::Stranger => {
                crate::report::warn(crate::report::Topic::NotHwbarr, &agree::stranger(creator));
                return Err(ffi::ERROR);
            }
            Greeting::Version(v) => {
                status = OTHER_VERSION;
                self.outcome = Some(Err(format!(
                    "rank {creator} runs hwbarr protocol {v}, rank {} protocol {}",
                    self.members[self.me],
                    agree::PROTOCOL
                )));
            }
            Greeting::Ours => {
                let theirs = Settings::from_words(&w[6..]).unwrap_or(self.settings);
                self.chosen = theirs.algorithm;
                let attached = if w[1] == NO_SEGMENT {
                    Err((OK, String::new()))
                } else if w[1] == OK {
                    let offer = Offer { pid: w[2] as u32, fd: w[3] as i32, len: w[4], token: w[5] };
                    Segment::attach(&offer, self.members.len()).map_err(|e| (code(&e), e.to_string()))
                } else {
                    Err((OK + 1, "rank 0 could not create the segment".into()))
                };
                if let Err((c, _)) = &attached {
                    status = *c;
                }
                self.outcome = Some(attached.map_err(|(_, why)| why));
            }
        }
        let [s0, s1] = self.settings.words();
        self.answers[0] = [agree::hello(), status, s0, s1];
        self.flight.isend(&self.answers[0][..], creator)?;
        self.flight.irecv(&mut self.verdict[..], creator)?;
        Ok(())
    }

    /// Rank 0: every answer arrived; decide, and tell every member.
    fn decide(&mut self) -> Result<(), c_int> {
        let mut verdict = self.outcome.take().expect("creator outcome");
        let mut algs = vec![(self.members[0], self.settings.algorithm)];
        for q in 1..self.members.len() {
            let a = self.answers[q];
            let peer = self.members[q];
            match agree::greeting(a[0]) {
                Greeting::Stranger => {
                    crate::report::warn(crate::report::Topic::NotHwbarr, &agree::stranger(peer));
                    return Err(ffi::ERROR);
                }
                Greeting::Version(v) => {
                    verdict = Err(format!("rank {peer} runs hwbarr protocol {v}, rank 0 protocol {}", agree::PROTOCOL));
                    continue;
                }
                Greeting::Ours => {}
            }
            if let Some(s) = Settings::from_words(&a[2..]) {
                algs.push((peer, s.algorithm));
            }
            let st = a[1];
            if st != OK && verdict.is_ok() {
                let e = std::io::Error::from_raw_os_error(st as i32);
                verdict = Err(format!("rank {peer} cannot map the segment: {e}"));
            }
        }
        self.disagreement = agree::differ(&algs)
            .map(|d| agree::disagreement(&[("algorithm", d)], &format!("algorithm ({})", self.settings.algorithm)));
        let linear = self.settings.algorithm == Algorithm::Linear && verdict.as_ref().is_err_and(|w| w.is_empty());
        self.verdict[0] = agree::hello();
        self.verdict[1] = match &verdict {
            Ok(_) => VERDICT_DEVICE,
            Err(_) if linear => VERDICT_LINEAR,
            Err(_) => VERDICT_FALLBACK,
        };
        self.outcome = Some(verdict);
        for q in 1..self.members.len() {
            let peer = self.members[q];
            self.flight.isend(&self.verdict[..], peer)?;
        }
        Ok(())
    }

    /// Advances the exchange without blocking. `Ok(None)`: not finished.
    /// `Ok(Some(..))`: the agreed outcome. `Err`: an MPI error code
    /// (communication failed, or a peer does not speak this exchange).
    pub fn poll(&mut self) -> Result<Option<Agreed>, c_int> {
        loop {
            if !self.flight.done()? {
                return Ok(None);
            }
            match self.stage {
                Stage::Offer => {
                    self.answer()?;
                    self.stage = Stage::Answers;
                }
                Stage::Answers if self.me == 0 => {
                    self.decide()?;
                    self.stage = Stage::Verdict;
                }
                Stage::Answers | Stage::Verdict => {
                    self.stage = Stage::Done;
                    if agree::greeting(self.verdict[0]) == Greeting::Stranger {
                        crate::report::warn(crate::report::Topic::NotHwbarr, &agree::stranger(self.members[0]));
                        return Err(ffi::ERROR);
                    }
                    let out = self.outcome.take().expect("outcome");
                    let verdict = match (out, self.verdict[1]) {
                        (Ok(mut seg), VERDICT_DEVICE) => {
                            seg.seal();
                            Verdict::Device(seg)
                        }
                        (_, VERDICT_LINEAR) => Verdict::Linear,
                        (Err(why), _) if !why.is_empty() => Verdict::NoDevice(why),
                        (_, _) => Verdict::NoDevice("a peer could not map the segment".into()),
                    };
                    let algorithm = match verdict {
                        Verdict::Linear => Algorithm::Linear,
                        _ => self.chosen,
                    };
                    return Ok(Some(Agreed { verdict, algorithm, disagreement: self.disagreement.take() }));
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
            std::mem::forget(std::mem::replace(&mut self.verdict, Box::new([0; VERDICT_WORDS])));
        }
    }
}
