//! A communicator's first exchange: on its first barrier of any kind (never
//! at creation), its ranks agree on one set of settings (rank 0's:
//! `words`), find who shares a node (`layout`, when the communicator spans
//! nodes) and set up each node's shared-memory device (`device`), or agree
//! to go without it. Each exchange is a non-blocking state machine, so a
//! first MPI_Ibarrier or MPI_Start runs it from progress; each is itself a
//! barrier (rank 0 hears from every rank before anyone hears back), so it
//! serves the call that started it. `lookout` turns a peer that will never
//! take part into an error instead of a hang.

use crate::barrier::inter::InterAlgorithm;
use crate::settings::Algorithm;

pub mod device;
pub mod layout;
pub mod lookout;
pub mod words;

#[cfg(test)]
mod failure_tests;

/// What the ranks agreed on in an exchange, the same on every rank (but
/// `disagreement`, which only rank 0 knows).
#[derive(Debug)]
pub struct Agreed {
    /// Rank 0's local algorithm (resolved from `auto`), which every rank
    /// runs; `linear` when rank 0 asked for it.
    pub algorithm: Algorithm,
    /// Across nodes: the leaders' algorithm (rank 0's request, resolved by
    /// the node count). None for a device exchange.
    pub inter: Option<InterAlgorithm>,
    /// Some(why): the ranks go without what the exchange was for (the
    /// device, or hwbarr's protocols across nodes) and fall back to
    /// hwbarr's linear barrier over point-to-point.
    pub fallback: Option<String>,
    /// Rank 0 only: the ranks' settings that differed from its own.
    pub disagreement: Option<String>,
}
