//! hwbarr: an Open MPI (4.1, 5.0, 6.0) `coll` component that serves
//! MPI_Barrier with software versions of two hardware barriers — the TUC
//! toggle-wire barrier and IBM Blue Gene's DMA-counter barrier — and
//! coll/basic's linear barrier as the reference.
//!
//! Layers, bottom up (`docs/design.md`, checked by `scripts/layers.py`):
//! the cores (`core`), the shared-memory layer (`shm`) and pure logic
//! (`settings`, `wait`, `pause`), free of Open MPI; the point-to-point transport
//! (`p2p`); who shares a node (`layout`); the first exchange (`exchange`);
//! a communicator's state and agreed route (`comm`); the barriers of each
//! route (`barrier`); the queue of barriers in flight (`engine`); the Open
//! MPI edge (`ompi`: module state, requests, progress, entry points).
#![warn(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

// Free of Open MPI; the cores, `sync` and the sleep protocol are also
// model-checked under loom (`--cfg loom`); `contention` is a heuristic
// on std atomics.
pub mod contention;
pub mod core;
pub mod express;
pub mod pause;
pub mod settings;
pub mod shm;
pub mod sync;
pub mod wait;

/// Declares modules that are not compiled under loom: they need the real
/// atomics (shared memory, Open MPI).
macro_rules! not_under_loom {
    ($($m:item)*) => { $( #[cfg(not(loom))] $m )* };
}

not_under_loom! {
    mod barrier;
    mod comm;
    mod engine;
    mod exchange;
    mod layout;
    mod ompi;
    mod p2p;
    mod topology;
}
