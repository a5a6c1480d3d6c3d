//! While a communicator's first exchange waits: signs that it never will
//! complete, so that it fails with a message instead of hanging.
//!
//! - A peer whose barrier is not hwbarr's (hwbarr not selected there) and
//!   whose first barrier is non-blocking runs libnbc's MPI_Ibarrier, on the
//!   tag it took for that call from the communicator's counter, and never
//!   sends hwbarr's messages. hwbarr takes a tag from the same counter
//!   wherever libnbc would (each MPI_Ibarrier, each persistent init:
//!   `engine::issue`), so its ranks stay in step with such a peer, and none
//!   of them ever sends on the tags it takes. The first exchange looks for
//!   a message on the tag of the call that started it: its sender runs
//!   another barrier. libnbc's first round sends at once to the next rank,
//!   so some hwbarr rank sees one whenever the ranks are mixed.
//! - A failure notice (`agree::FAILED`, 8 bytes, the only message of that
//!   size on hwbarr's tag) waiting unreceived: a rank failed, for instance
//!   because it saw such a peer, and told us before we expected anything
//!   from it. Notices reach only the receives that expect them otherwise.
//!
//! Looking costs two MPI_Iprobe, so it is done once every `EVERY` polls.

use std::ffi::c_int;

use crate::agree;
use crate::ompi::report::{self, Topic};
use crate::p2p::{P2p, ERROR};

/// Polls between two looks.
const EVERY: u32 = 16;

pub struct Lookout {
    /// The tag a peer's libnbc barrier of this call would use: the one
    /// this rank took for it (None for a blocking MPI_Barrier, which meets
    /// tuned's on hwbarr's own tag instead: `agree::greeting`).
    foreign: Option<c_int>,
    polls: u32,
}

impl Lookout {
    /// For the first exchange of a barrier call that took `foreign` as its
    /// non-blocking collective tag (`engine::issue`).
    pub fn new(foreign: Option<c_int>) -> Lookout {
        Lookout { foreign, polls: 0 }
    }

    /// An error (after saying why, for a peer of another barrier) when the
    /// exchange cannot complete.
    pub fn check(&mut self, p2p: &impl P2p) -> Result<(), c_int> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls % EVERY != 1 {
            return Ok(());
        }
        if let Some((peer, _)) = self.foreign.and_then(|tag| p2p.probe(Some(tag))) {
            report::warn(Topic::NotHwbarr, &agree::stranger(peer));
            return Err(ERROR);
        }
        match p2p.probe(None) {
            Some((_, bytes)) if bytes == std::mem::size_of_val(&agree::FAILED) => Err(ERROR),
            _ => Ok(()),
        }
    }
}
