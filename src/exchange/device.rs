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
//! the messages carry each rank's settings (`words`): rank 0's algorithm is
//! the one every member runs, and rank 0 names any member that differed.
//!
//! On the line barrier the verdict also says how many candidate lines the
//! ranks try (rank 0's `Comm::line_trial`) over the barriers after this one
//! (`shm::line_pick`): every rank sets its trial up on the segment before
//! its first barrier there.

use std::collections::hash_map::RandomState;
use std::ffi::c_int;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::Ordering::{Acquire, Release};

use crate::exchange::lookout::Lookout;
use crate::exchange::words::{self, Greeting, Settings, SETTINGS_WORDS};
use crate::exchange::Agreed;
use crate::ompi::report::{self, Topic};
use crate::shm::line_pick::Trial;
use crate::shm::segment::{Offer, Segment, LINE_SLOTS};
use crate::p2p::{Flight, P2p, Slot, ERROR};
use crate::settings::Algorithm;
use crate::topology::{self, Place};

const OK: u64 = 0;
/// Offer status: rank 0 runs `linear`, so no segment (its peers follow).
const NO_SEGMENT: u64 = u64::MAX - 1;
/// Answer status: another protocol version.
const OTHER_VERSION: u64 = u64::MAX - 2;
/// hello, status, pid, fd, len, token, settings.
const OFFER_WORDS: usize = 6 + SETTINGS_WORDS;
/// hello, status, settings.
const ANSWER_WORDS: usize = 2 + SETTINGS_WORDS;
/// hello, verdict: its kind in the low byte; a device verdict carries the
/// candidate lines to try above it (`line_pick`; 0 or 1: none). Two words
/// in every protocol version: a peer of another version must still receive
/// the verdict that makes it fall back (`words`).
const VERDICT_WORDS: usize = 2;
const VERDICT_DEVICE: u64 = 0;
const VERDICT_FALLBACK: u64 = 1;
const VERDICT_LINEAR: u64 = 2;
/// A verdict word's kind.
fn kind(verdict: u64) -> u64 {
    verdict & 0xff
}

/// A fresh token that ties a segment to this one exchange.
fn token() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// Answer status: the segment a peer opened is not this communicator's
/// (its size or token differ: `Segment::attach`).
const NOT_OURS: u64 = u64::MAX - 3;
/// Answer status: an error without an OS error number.
const NO_ERRNO: u64 = u64::MAX;

/// An errno-like code for a failure to attach (never 0, never `OK`).
fn code(e: &std::io::Error) -> u64 {
    if e.kind() == std::io::ErrorKind::InvalidData {
        return NOT_OURS;
    }
    e.raw_os_error().filter(|&c| c > 0).map_or(NO_ERRNO, |c| c as u64)
}

/// Why a peer that answered `status` (not `OK`) could not map the segment.
fn why_not_mapped(status: u64) -> String {
    match status {
        NOT_OURS => "the segment it opened is not this communicator's (its size or token differ)".to_string(),
        c if c > 0 && c <= i32::MAX as u64 => std::io::Error::from_raw_os_error(c as i32).to_string(),
        _ => "an error without an OS error number".to_string(),
    }
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
pub struct DeviceExchange<P: P2p> {
    /// The ranks (in the communicator) sharing the device; the first creates it.
    members: Vec<c_int>,
    /// Our index in `members`.
    me: usize,
    settings: Settings,
    /// Our algorithm was `auto` resolved here: we tell rank 0 `auto`, which
    /// takes its resolution (the ranks may see different facts, e.g. their
    /// waiting policy) and is no disagreement.
    auto: bool,
    flight: Flight<P>,
    stage: Stage,
    /// Peer: where rank 0's offer arrives.
    offer: Option<Slot>,
    /// Rank 0: where each peer's answer arrives (peer q at q-1).
    answers: Vec<Slot>,
    /// Peer: where the verdict arrives.
    verdict_slot: Option<Slot>,
    /// The verdict, as rank 0 sent it.
    verdict: [u64; VERDICT_WORDS],
    /// Rank 0's segment, or our mapping of it, or why not.
    outcome: Option<Result<Segment, String>>,
    /// Peer: rank 0's settings.
    chosen: Algorithm,
    disagreement: Option<String>,
    /// The communicator's first exchange (not a node's, after the layout):
    /// watches for peers that will never take part.
    lookout: Option<Lookout>,
    /// Our place in the node's caches, written into the segment's table.
    place: Place,
    /// The line barrier's trial of candidate lines (rank 0's count wins).
    trial: Trial,
}

impl<P: P2p> DeviceExchange<P> {
    /// Starts the exchange among `members` (ranks of `p2p`'s communicator;
    /// at least 2) as `members[me]`, with our `settings` (rank 0's win;
    /// `auto`: their algorithm is `auto` resolved) and our `place` in the
    /// node's caches (the trees follow them); `lookout` when it is the
    /// communicator's first exchange; `trial`: the candidate lines the line
    /// barrier would try (`line_pick`; 1 or less: none; rank 0's count
    /// counts).
    pub fn start(
        p2p: P,
        members: &[c_int],
        me: usize,
        (settings, auto): (Settings, bool),
        place: Place,
        lookout: Option<Lookout>,
        trial: Trial,
    ) -> Result<DeviceExchange<P>, c_int> {
        let n = members.len();
        let mut b = DeviceExchange {
            members: members.to_vec(),
            me,
            settings,
            auto,
            flight: Flight::new(p2p),
            stage: Stage::Offer,
            offer: None,
            answers: Vec::new(),
            verdict_slot: None,
            verdict: [0; VERDICT_WORDS],
            outcome: None,
            chosen: settings.algorithm,
            disagreement: None,
            lookout,
            place,
            trial,
        };
        if me == 0 {
            let [s0, s1] = settings.words();
            let offer: [u64; OFFER_WORDS];
            if settings.algorithm == Algorithm::Linear {
                offer = [words::hello(), NO_SEGMENT, 0, 0, 0, 0, s0, s1];
                b.outcome = Some(Err(String::new()));
            } else {
                let created = Segment::create(n, token());
                if let Ok(seg) = &created {
                    seg.places()[0].store(place.word(), Release);
                }
                offer = match &created {
                    Ok(seg) => {
                        let o = seg.offer().expect("creator holds the fd");
                        [words::hello(), OK, o.pid as u64, o.fd as u64, o.len, o.token, s0, s1]
                    }
                    Err(e) => [words::hello(), code(e), 0, 0, 0, 0, s0, s1],
                };
                b.outcome = Some(created.map_err(|e| format!("cannot create shared memory: {e}")));
            }
            // Every receive before any send: a failure of ours reaches
            // each peer in place of the first message it expects from us.
            for &peer in &members[1..] {
                let slot = b.flight.recv(ANSWER_WORDS, peer)?;
                b.answers.push(slot);
            }
            for &peer in &members[1..] {
                b.flight.send(&offer, peer)?;
            }
            b.stage = Stage::Answers;
        } else {
            b.offer = Some(b.flight.recv(OFFER_WORDS, members[0])?);
        }
        Ok(b)
    }

    /// Peer: the offer arrived; adopt rank 0's settings, map the segment if
    /// there is one, and answer.
    fn answer(&mut self) -> Result<(), c_int> {
        let w = self.flight.take(self.offer.expect("peer"));
        let creator = self.members[0];
        let mut status = OK;
        match words::greeting(w[0]) {
            Greeting::Stranger => {
                report::warn(Topic::NotHwbarr, &words::stranger(creator));
                return Err(ERROR);
            }
            Greeting::Version(v) => {
                status = OTHER_VERSION;
                self.outcome = Some(Err(format!(
                    "rank {creator} runs hwbarr protocol {v}, rank {} protocol {}",
                    self.members[self.me],
                    words::protocol()
                )));
            }
            Greeting::Ours => {
                let theirs = Settings::from_words(&w[6..]).unwrap_or(self.settings);
                self.chosen = theirs.algorithm;
                let attached = if w[1] == NO_SEGMENT {
                    Err((OK, String::new()))
                } else if w[1] == OK {
                    let offer = Offer { pid: w[2] as u32, fd: w[3] as i32, len: w[4], token: w[5] };
                    Segment::attach(&offer, self.members.len())
                        .inspect(|seg| seg.places()[self.me].store(self.place.word(), Release))
                        .map_err(|e| (code(&e), e.to_string()))
                } else {
                    Err((OK + 1, "rank 0 could not create the segment".into()))
                };
                if let Err((c, _)) = &attached {
                    status = *c;
                }
                self.outcome = Some(attached.map_err(|(_, why)| why));
            }
        }
        // The verdict's receive before our answer: if it cannot be posted,
        // rank 0 gets a failure notice instead of an answer.
        self.verdict_slot = Some(self.flight.recv(VERDICT_WORDS, creator)?);
        let asked = if self.auto { Settings { algorithm: Algorithm::Auto, ..self.settings } } else { self.settings };
        let [s0, s1] = asked.words();
        self.flight.send(&[words::hello(), status, s0, s1], creator)?;
        Ok(())
    }

    /// Rank 0: every answer arrived; decide, and tell every member.
    fn decide(&mut self) -> Result<(), c_int> {
        let mut verdict = self.outcome.take().expect("creator outcome");
        let mut algs = vec![(self.members[0], self.settings.algorithm)];
        let mut other_version = false;
        for q in 1..self.members.len() {
            let a = self.flight.take(self.answers[q - 1]);
            let peer = self.members[q];
            match words::greeting(a[0]) {
                Greeting::Stranger => {
                    report::warn(Topic::NotHwbarr, &words::stranger(peer));
                    return Err(ERROR);
                }
                // The first peer that differs is named.
                Greeting::Version(v) if !other_version => {
                    other_version = true;
                    verdict = Err(format!("rank {peer} runs hwbarr protocol {v}, rank 0 protocol {}", words::protocol()));
                    continue;
                }
                Greeting::Version(_) => continue,
                Greeting::Ours => {}
            }
            if let Some(s) = Settings::from_words(&a[2..]) {
                algs.push((peer, s.algorithm));
            }
            let st = a[1];
            if st != OK && verdict.is_ok() {
                verdict = Err(format!("rank {peer} cannot map the segment: {}", why_not_mapped(st)));
            }
        }
        let linear = self.settings.algorithm == Algorithm::Linear && verdict.as_ref().is_err_and(|w| w.is_empty());
        self.verdict[0] = words::hello();
        let trial = self.settings.algorithm == Algorithm::Line && self.trial.lines >= 2;
        self.verdict[1] = match &verdict {
            Ok(_) if trial => VERDICT_DEVICE | (self.trial.lines.min(LINE_SLOTS) as u64) << 8,
            Ok(_) => VERDICT_DEVICE,
            Err(_) if linear => VERDICT_LINEAR,
            Err(_) => VERDICT_FALLBACK,
        };
        // Falling back, nobody runs the algorithms compared: no disagreement.
        if kind(self.verdict[1]) != VERDICT_FALLBACK {
            self.disagreement = words::differ(&algs)
                .map(|d| words::disagreement(&[("algorithm", d)], &format!("algorithm ({})", self.settings.algorithm)));
        }
        self.outcome = Some(verdict);
        for q in 1..self.members.len() {
            let peer = self.members[q];
            if let Err(rc) = self.flight.send(&self.verdict, peer) {
                if kind(self.verdict[1]) != VERDICT_FALLBACK {
                    return Err(rc);
                }
                // Falling back is no error: send the verdict again, so that
                // one lost send does not fail the communicator. If that
                // fails too, the communicator fails (`Comm::fail`): the
                // members told so far get rank 0's notice in their linear
                // barrier, the others in place of the verdict.
                report::verbose(0, &format!(
                    "sending the fallback verdict of the device exchange to rank {peer} failed (error {rc}); \
                     sending it again"
                ));
                self.flight.send(&self.verdict, peer)?;
            }
        }
        Ok(())
    }

    /// Advances the exchange without blocking. `Ok(None)`: not finished.
    /// `Ok(Some((agreed, segment)))`: the agreed outcome, and the device
    /// (every member mapped it) unless the ranks go without one: rank 0
    /// runs `linear`, or `agreed.fallback` says why not. `Err`: an MPI error code
    /// (communication failed, a peer sent a failure notice, or a peer does
    /// not speak this exchange). Then the caller fails the communicator
    /// (`Comm::fail`), which tells the peers; the segment's failure word is
    /// set here, for the members that the verdict already released onto it.
    pub fn poll(&mut self) -> Result<Option<(Agreed, Option<Segment>)>, c_int> {
        let r = self.advance();
        let seg = match &self.outcome {
            Some(Ok(seg)) => Some(seg),
            _ => None,
        };
        if let (Some(seg), Err(rc)) = (seg, &r) {
            if crate::p2p::is_process_failure(*rc) {
                seg.set_revoked(*rc);
            } else {
                seg.set_failed();
            }
        }
        r
    }

    fn advance(&mut self) -> Result<Option<(Agreed, Option<Segment>)>, c_int> {
        loop {
            if !self.flight.done()? {
                if let Some(l) = &mut self.lookout {
                    l.check(&mut self.flight)?;
                }
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
                    if let Some(slot) = self.verdict_slot.take() {
                        self.verdict.copy_from_slice(&self.flight.take(slot));
                    }
                    if words::greeting(self.verdict[0]) == Greeting::Stranger {
                        report::warn(Topic::NotHwbarr, &words::stranger(self.members[0]));
                        return Err(ERROR);
                    }
                    let out = self.outcome.take().expect("outcome");
                    let (segment, fallback) = match (out, kind(self.verdict[1])) {
                        (Ok(mut seg), VERDICT_DEVICE) => {
                            // Every member wrote its place before it
                            // answered, and the verdict came after all
                            // answers: every rank reads the same table.
                            let places: Vec<Place> =
                                seg.places().iter().map(|w| Place::from_word(w.load(Acquire))).collect();
                            seg.seal(topology::shape(&places), topology::tree(&places));
                            (Some(seg), None)
                        }
                        (_, VERDICT_LINEAR) => (None, None),
                        (Err(why), _) if !why.is_empty() => (None, Some(why)),
                        (_, _) => (None, Some("a peer could not map the segment".into())),
                    };
                    let algorithm = if kind(self.verdict[1]) == VERDICT_LINEAR { Algorithm::Linear } else { self.chosen };
                    let agreed = Agreed { algorithm, inter: None, fallback, disagreement: self.disagreement.take() };
                    let lines = (self.verdict[1] >> 8) as usize;
                    let segment = segment.map(|mut seg| {
                        if algorithm == Algorithm::Line && (2..=LINE_SLOTS).contains(&lines) {
                            seg.start_line_trial(self.me, lines, crate::wait::now_ns);
                        }
                        seg
                    });
                    self.stage = Stage::Done;
                    return Ok(Some((agreed, segment)));
                }
                Stage::Done => return Err(ERROR),
            }
        }
    }
}

/// An exchange dropped before its end with the segment in hand (the
/// communicator failed or was revoked meanwhile, or a panic unwound out of
/// it) marks the device failed: a peer may still attach to it, and the mark
/// keeps it from ever being kept for another communicator (`shm::kept`).
impl<P: P2p> Drop for DeviceExchange<P> {
    fn drop(&mut self) {
        if let Some(Ok(seg)) = &self.outcome {
            seg.set_failed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::counter;
    use crate::p2p::mem;
    use std::sync::atomic::Ordering::SeqCst;

    /// A peer's reason for not mapping the segment reaches rank 0's
    /// message: an OS error by its text, a segment that is not this
    /// communicator's by name (it read "Unknown error -1" before).
    #[test]
    fn a_peer_says_why_it_cannot_map_the_segment() {
        use std::io::{Error, ErrorKind};
        let eperm = code(&Error::from_raw_os_error(1));
        assert_eq!(why_not_mapped(eperm), Error::from_raw_os_error(1).to_string());
        let mismatch = code(&Error::new(ErrorKind::InvalidData, "segment is not this communicator's"));
        assert!(why_not_mapped(mismatch).starts_with("the segment it opened is not this communicator's"));
        let other = code(&Error::other("no errno"));
        assert_eq!(why_not_mapped(other), "an error without an OS error number");
        for c in [eperm, mismatch, other] {
            assert!(c != OK && c != OTHER_VERSION, "{c}");
        }
    }

    /// Runs the exchange among `algs.len()` ranks (rank r asking for
    /// `algs[r]`) to its end on every rank.
    fn exchange(algs: &[Algorithm]) -> Vec<(Agreed, Option<Segment>)> {
        exchange_versions(algs, &[])
    }

    /// As `exchange`, with the ranks in `others` speaking the next protocol.
    fn exchange_versions(algs: &[Algorithm], others: &[usize]) -> Vec<(Agreed, Option<Segment>)> {
        exchange_lines(algs, others, &vec![1; algs.len()])
    }

    /// As `exchange_versions`, rank r offering `lines[r]` candidate lines.
    fn exchange_lines(algs: &[Algorithm], others: &[usize], lines: &[usize]) -> Vec<(Agreed, Option<Segment>)> {
        exchange_then(algs, others, lines, 0)
    }

    /// As `exchange_lines`, each rank then running `rounds` line barriers
    /// on its device (as `barrier::device` does: the trial's step, the
    /// arrival, the wait on the ticket's line).
    fn exchange_then(algs: &[Algorithm], others: &[usize], lines: &[usize], rounds: usize) -> Vec<(Agreed, Option<Segment>)> {
        use crate::core::line;
        let n = algs.len();
        let algs = algs.to_vec();
        let others = others.to_vec();
        let trials: Vec<Trial> = lines.iter().map(|&lines| Trial { lines }).collect();
        mem::run(mem::network(&vec!["a"; n]), move |ep| {
            let me = ep.rank() as usize;
            if others.contains(&me) {
                let v = words::PROTOCOL + 1;
                words::TEST_PROTOCOL.with(|p| p.set(Some(v)));
                assert_eq!(words::protocol(), v, "rank {me}");
            }
            let members: Vec<c_int> = (0..n as c_int).collect();
            let s = Settings { algorithm: algs[me].for_node(n, me.is_multiple_of(2)), inter: None };
            let mut b = DeviceExchange::start(ep, &members, me, (s, algs[me] == Algorithm::Auto), Place::UNKNOWN, None, trials[me])
                .unwrap();
            let out = loop {
                if let Some(a) = b.poll().unwrap() {
                    break a;
                }
                std::thread::yield_now();
            };
            if let Some(seg) = &out.1 {
                for _ in 0..rounds {
                    seg.line_step().unwrap();
                    let slot = usize::from(seg.line_slot());
                    let c = line::arrive(seg.line_wires(), me, seg.line_mine());
                    while !line::is_released(seg.line_candidate(slot), c) {
                        std::thread::yield_now();
                    }
                }
            }
            out
        })
    }

    #[test]
    fn four_ranks_share_rank_0s_segment_and_algorithm() {
        use Algorithm::*;
        let out = exchange(&[Counter, Toggle, Counter, Counter]);
        let segs: Vec<&Segment> = out.iter().map(|(_, seg)| seg.as_ref().expect("a device")).collect();
        assert!(out.iter().all(|(a, _)| a.algorithm == Counter && a.fallback.is_none()));
        assert_eq!(out[0].0.disagreement.as_deref().unwrap(), "coll_hwbarr_algorithm differs between ranks \
            (counter on ranks 0, 2, 3; toggle on rank 1); every rank uses rank 0's algorithm (counter)");
        assert!(out[1..].iter().all(|(a, _)| a.disagreement.is_none()));
        // One segment: each rank's arrival reaches every other's mapping.
        for (r, seg) in segs.iter().enumerate() {
            counter::arrive(seg.counters(), r);
        }
        assert!(segs.iter().enumerate().all(|(r, s)| counter::is_released(s.counters(), r)));
        assert_eq!(segs[3].counters()[0].load(SeqCst), 0);
    }

    /// Ranks with another protocol version, rank 0 or peers: every rank
    /// falls back, and rank 0 (which speaks for the communicator) says why,
    /// naming the first peer that differs.
    #[test]
    fn another_protocol_version_makes_every_rank_fall_back() {
        for (others, named) in [(&[0][..], "rank 1 runs"), (&[2], "rank 2 runs"), (&[2, 3], "rank 2 runs")] {
            // Rank 1 asks for another algorithm than rank 0: not named, as
            // nobody runs either.
            let algs = [Algorithm::Counter, Algorithm::Toggle, Algorithm::Counter, Algorithm::Counter];
            let out = exchange_versions(&algs, others);
            assert!(out[0].0.disagreement.is_none(), "{:?} ({others:?})", out[0].0.disagreement);
            for (r, (a, seg)) in out.iter().enumerate() {
                match (&a.fallback, seg) {
                    (Some(why), None) => assert!(r > 0 || why.contains(named), "rank {r}: {why} ({others:?})"),
                    _ => panic!("rank {r} did not fall back (next protocol on ranks {others:?})"),
                }
            }
        }
    }

    /// Ranks asking `auto` that resolve it differently (here: even ranks
    /// have a core each, odd ones share) take rank 0's resolution without
    /// a word; a rank naming another algorithm is still named.
    #[test]
    fn auto_is_rank_0s_resolution_and_no_disagreement() {
        use Algorithm::*;
        let out = exchange(&[Auto, Auto, Auto, Auto]);
        let want = Auto.for_node(4, true);
        assert_ne!(want, Auto.for_node(4, false), "the test needs the two facts to differ");
        assert!(out.iter().all(|(a, seg)| seg.is_some() && a.algorithm == want));
        assert!(out[0].0.disagreement.is_none(), "{:?}", out[0].0.disagreement);
        let out = exchange(&[Auto, Auto, Counter, Auto]);
        assert!(out.iter().all(|(a, _)| a.algorithm == want));
        let d = out[0].0.disagreement.as_deref().expect("rank 2 named");
        assert!(d.contains("counter on rank 2") && !d.contains("rank 1"), "{d}");
    }

    /// On the line barrier every rank sets up rank 0's count of candidate
    /// lines to try over its next barriers, whatever its own; after them
    /// all run on one line, the same count (here with rank 0's 16, and
    /// rank 0 noting what the trial read); with 1, or another algorithm,
    /// nobody tries any and the first line serves.
    #[test]
    fn line_ranks_try_rank_0s_candidate_lines_after_the_exchange() {
        use crate::core::line;
        use crate::shm::line_pick::LineTrial;
        use Algorithm::*;
        let out = exchange_lines(&[Line, Line, Line], &[], &[16, 1, 3]);
        for (r, (_, seg)) in out.iter().enumerate() {
            let seg = seg.as_ref().unwrap();
            assert_eq!((seg.line_trial_slots(), seg.line_in_use()), (Some(16), (0, None)), "rank {r}");
        }
        let rounds = LineTrial::barriers(16) as usize + 5;
        let out = exchange_then(&[Line, Line, Line], &[], &[16, 1, 3], rounds);
        let used: Vec<_> = out.iter().map(|(_, seg)| seg.as_ref().unwrap().line_in_use()).collect();
        assert!(used.iter().all(|u| u.0 == used[0].0), "{used:?}");
        let (slots, ns, first) = used[0].1.expect("rank 0 notes the trial");
        assert!(slots == 16 && ns > 0.0 && first < 1e9, "{used:?}");
        assert!(used[1..].iter().all(|u| u.1.is_none()));
        let segs: Vec<&Segment> = out.iter().map(|(_, s)| s.as_ref().unwrap()).collect();
        assert!(segs.iter().all(|s| s.line_trial_slots().is_none()));
        let mine: Vec<_> = segs.iter().map(|s| s.line_mine().load(SeqCst)).collect();
        assert!(mine.iter().all(|&m| m == mine[0]), "{mine:?}");
        assert!(segs.iter().all(|s| s.line_wires().iter().all(|w| w.load(SeqCst) == mine[0])));
        let counts: Vec<_> = segs.iter().enumerate().map(|(r, s)| line::arrive(s.line_wires(), r, s.line_mine())).collect();
        assert!(segs.iter().zip(&counts).all(|(s, &c)| line::is_released(s.line_wires(), c)));
        for (algs, lines) in [([Line, Line], [1, 16]), ([Counter, Counter], [16, 16])] {
            let out = exchange_lines(&algs, &[], &lines);
            assert!(
                out.iter().all(|(_, s)| s.as_ref().unwrap().line_in_use() == (0, None)
                    && s.as_ref().unwrap().line_trial_slots().is_none()),
                "{algs:?} {lines:?}"
            );
        }
    }

    #[test]
    fn three_ranks_follow_rank_0_to_linear() {
        use Algorithm::*;
        let out = exchange(&[Linear, Toggle, Toggle]);
        assert!(out.iter().all(|(a, seg)| seg.is_none() && a.fallback.is_none() && a.algorithm == Linear));
        assert!(out[0].0.disagreement.is_some());
        let out = exchange(&[Toggle, Linear, Toggle]);
        assert!(out.iter().all(|(a, seg)| seg.is_some() && a.algorithm == Toggle));
    }
}
