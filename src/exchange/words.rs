//! What the ranks of a communicator must agree on before their first
//! barrier can meet: hwbarr's protocol version, the local algorithm and the
//! leaders' algorithm. Each rank's settings travel in the first exchange
//! (`device` on one node, `layout` across nodes), which
//! every rank takes part in whatever its algorithm. Rank 0's settings win;
//! rank 0 names any disagreement once. Ranks with another protocol version
//! fall back together to hwbarr's linear barrier, whose messages (zero-byte
//! signals to and from rank 0, 8-byte failure notices) every protocol
//! version keeps as they are.
//!
//! Every message of the first exchange starts with `hello()`. A peer whose
//! barrier is not hwbarr's (hwbarr not selected there: its
//! `coll_hwbarr_priority` or `coll` list differs) sends other messages on
//! the same tag, typically zero-byte ones, which leave a zero where the
//! greeting belongs: that is reported as such, and the barrier fails.

use std::ffi::c_int;

use crate::settings::{Algorithm, InterAlgorithm, Setting};

/// The first exchange's format. Ranks that differ fall back together; a
/// later version must keep the first messages' sizes and this word first.
/// Version 2: a rank's first message in the layout exchange carries its
/// local algorithm as requested, `auto` included (version 1 resolved it by
/// the communicator's size).
/// Version 3: rank 0's answer in the layout exchange carries a rank's own
/// node and, to a leader, the leaders, not every rank's node id; a rank of
/// another version gets the answer of version 2, which every later version
/// reads and sends to the versions before it.
/// Version 4: a leader gets, of the leaders, only those it talks to
/// (`inter::partners`: all for the counter broadcast, about 2 log2 nodes
/// for dissemination), each with its node's index in the same word.
/// Version 5: the device's segment holds the polled barrier's wires (a
/// line per rank, before the places), and the algorithm word may be 5
/// (`polled`).
/// Version 6: a second line per rank after the polled wires, where a
/// polled leader marks its arrival (so that others can read for it).
/// Version 7: the device's segment holds candidate lines for the line
/// barrier, and a device verdict says how many the ranks try
/// (`shm::line_pick`).
/// Version 8: the ranks try the candidate lines over the barriers after the
/// exchange, not inside it, moving between lines at their arrivals.
pub const PROTOCOL: u64 = 8;
const MAGIC: u64 = 0x4857_4252; // "HWBR"

/// This rank's protocol version: `PROTOCOL`; in unit tests, where threads
/// are ranks, a thread may speak another (`TEST_PROTOCOL`), so that ranks
/// that differ can be tested before a second version exists.
pub fn protocol() -> u64 {
    #[cfg(test)]
    if let Some(v) = TEST_PROTOCOL.with(std::cell::Cell::get) {
        return v;
    }
    PROTOCOL
}

#[cfg(test)]
thread_local! {
    /// Unit tests: this thread's protocol version instead of `PROTOCOL`.
    pub static TEST_PROTOCOL: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The first word of every first-exchange message.
pub fn hello() -> u64 {
    (MAGIC << 32) | protocol()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greeting {
    Ours,
    /// hwbarr, another protocol version.
    Version(u64),
    /// Not hwbarr's message.
    Stranger,
}

pub fn greeting(w: u64) -> Greeting {
    match (w >> 32, w & 0xffff_ffff) {
        (MAGIC, v) if v == protocol() => Greeting::Ours,
        (MAGIC, v) => Greeting::Version(v),
        _ => Greeting::Stranger,
    }
}

/// One rank's settings: the local algorithm and the leaders' algorithm as
/// requested (`None`: auto). The local algorithm is resolved from `auto`
/// before it is sent, except in a rank's first message of the layout
/// exchange (`requested_from_words`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub algorithm: Algorithm,
    pub inter: Option<InterAlgorithm>,
}

pub const SETTINGS_WORDS: usize = 2;

impl Settings {
    /// Each setting travels as its index in its table (`settings`), which
    /// is also the value Open MPI stores for it.
    pub fn words(&self) -> [u64; SETTINGS_WORDS] {
        [self.algorithm.index() as u64, self.inter.index() as u64]
    }

    /// None: words no rank of this version sends (the local algorithm
    /// resolved from `auto`).
    pub fn from_words(w: &[u64]) -> Option<Settings> {
        Self::requested_from_words(w).filter(|s| s.algorithm != Algorithm::Auto)
    }

    /// As `from_words`, `auto` allowed: a rank's first message of the
    /// layout exchange, which rank 0 resolves once it knows the nodes.
    pub fn requested_from_words(w: &[u64]) -> Option<Settings> {
        let algorithm = Algorithm::from_index(usize::try_from(*w.first()?).ok()?)?;
        let inter = Option::<InterAlgorithm>::from_index(usize::try_from(*w.get(1)?).ok()?)?;
        Some(Settings { algorithm, inter })
    }
}

/// "toggle on ranks 0, 2; counter on rank 1" when `values` (value of each
/// rank, by rank) hold more than one value; None when all agree.
pub fn differ<T: PartialEq + std::fmt::Display>(values: &[(c_int, T)]) -> Option<String> {
    let mut groups: Vec<(&T, Vec<c_int>)> = Vec::new();
    for (r, v) in values {
        match groups.iter_mut().find(|(g, _)| *g == v) {
            Some((_, rs)) => rs.push(*r),
            None => groups.push((v, vec![*r])),
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(v, rs)| {
            let list: Vec<String> = rs.iter().map(c_int::to_string).collect();
            format!("{v} on rank{} {}", if rs.len() > 1 { "s" } else { "" }, list.join(", "))
        })
        .collect();
    Some(parts.join("; "))
}

/// The one line rank 0 prints about disagreeing ranks; `params` are
/// (parameter, differences) pairs.
pub fn disagreement(params: &[(&str, String)], chosen: &str) -> String {
    let what: Vec<String> =
        params.iter().map(|(p, d)| format!("coll_hwbarr_{p} differs between ranks ({d})")).collect();
    format!("{}; every rank uses rank 0's {chosen}", what.join(", "))
}

/// The message for a peer that does not speak hwbarr's first exchange: a
/// message of its that is not hwbarr's arrived there. Mostly its coll
/// selection differs; ranks in different operations on the communicator
/// (collectives out of order, or communicators that do not match across
/// ranks) look the same from here.
pub fn stranger(peer: c_int) -> String {
    format!(
        "rank {peer} does not run hwbarr's barrier on this communicator (its coll_hwbarr_priority, \
         coll list or hwbarr installation differs from this rank's, or it is in another operation on \
         this communicator): the ranks' barriers cannot meet; give every rank the same coll settings \
         and the same collectives in the same order"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_differences() {
        for algorithm in [Algorithm::Toggle, Algorithm::Counter, Algorithm::Linear] {
            for inter in [None, Some(InterAlgorithm::Counter), Some(InterAlgorithm::Dissemination)] {
                let s = Settings { algorithm, inter };
                assert_eq!(Settings::from_words(&s.words()), Some(s));
            }
        }
        // `auto` (index 0) only where it is requested: a layout exchange's
        // first message.
        assert_eq!(Settings::from_words(&[0, 0]), None);
        assert_eq!(Settings::requested_from_words(&[0, 0]), Some(Settings { algorithm: Algorithm::Auto, inter: None }));
        assert_eq!(Settings::requested_from_words(&[99, 0]), None);
        assert_eq!(greeting(hello()), Greeting::Ours);
        assert_eq!(greeting(0), Greeting::Stranger);
        assert_eq!(greeting((MAGIC << 32) | (PROTOCOL + 1)), Greeting::Version(PROTOCOL + 1));
        assert_eq!(greeting(crate::p2p::FAILED), Greeting::Stranger);
        assert!(!crate::p2p::is_failure(hello()));
        assert_eq!(differ(&[(0, "a"), (1, "a")]), None);
        assert_eq!(
            differ(&[(0, "toggle"), (1, "counter"), (2, "toggle")]).unwrap(),
            "toggle on ranks 0, 2; counter on rank 1"
        );
    }
}
