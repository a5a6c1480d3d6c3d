//! coll/basic's linear barrier, the reference: every rank sends a zero-byte
//! message to rank 0, rank 0 receives n-1 of them, then sends n-1 releases.
//! Runs on the point-to-point transport (Open MPI's PML in the component).

use std::ffi::c_int;

use crate::p2p::{recv_signal, P2p, ANY_SOURCE};

/// The linear barrier on `p2p`'s communicator as `rank` of `size`.
pub fn barrier(p2p: &impl P2p, rank: c_int, size: c_int) -> Result<(), c_int> {
    if rank > 0 {
        p2p.send(&[], 0)?;
        return recv_signal(p2p, 0);
    }
    for _ in 1..size {
        recv_signal(p2p, ANY_SOURCE)?;
    }
    for q in 1..size {
        p2p.send(&[], q)?;
    }
    Ok(())
}

/// The linear barrier among `members` (ranks of `p2p`'s communicator) as
/// `members[me]`; `members[0]` gathers and releases. Serves a node's local
/// phase when its shared-memory device is unusable.
pub fn barrier_among(p2p: &impl P2p, members: &[c_int], me: usize) -> Result<(), c_int> {
    if me > 0 {
        p2p.send(&[], members[0])?;
        return recv_signal(p2p, members[0]);
    }
    for &q in &members[1..] {
        recv_signal(p2p, q)?;
    }
    for &q in &members[1..] {
        p2p.send(&[], q)?;
    }
    Ok(())
}
