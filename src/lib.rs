//! hwbarr: an Open MPI (4.1, 5.0, 6.0) `coll` component that serves
//! MPI_Barrier with software versions of two hardware barriers — the TUC
//! toggle-wire barrier and IBM Blue Gene's DMA-counter barrier — and
//! coll/basic's linear barrier as the reference.
//!
//! Layers, bottom up (README, "Design: modules and imports"): the cores
//! (`core`), the shared-memory layer (`shm`) and pure logic (`settings`,
//! `agree`, `wait`), free of Open MPI; the point-to-point transport
//! (`p2p`); the protocols over it (`bootstrap`, `topo`, `inter`, `hier`,
//! `linear`); a communicator's state (`comm`) and its barrier queue
//! (`engine`); the Open MPI edge (`ompi`).
#![warn(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

// Free of Open MPI; the cores, `sync` and the sleep protocol are also
// model-checked under loom (`--cfg loom`).
pub mod agree;
pub mod core;
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
    mod bootstrap;
    mod comm;
    mod engine;
    mod hier;
    mod inter;
    mod linear;
    mod lookout;
    mod ompi;
    mod p2p;
    mod topo;
    #[cfg(test)]
    mod failure_tests;
}
