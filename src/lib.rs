//! hwbarr: an Open MPI 4.1 `coll` component that serves MPI_Barrier with
//! software versions of two hardware barriers — the TUC toggle-wire barrier
//! and IBM Blue Gene's DMA-counter barrier — and coll/basic's linear
//! barrier as the reference.
//!
//! Layout: `core` holds the barrier algorithms in safe Rust, free of Open
//! MPI; `device` the node-local shared-memory segment they run on; the rest
//! is the component seen by Open MPI (`component`, `module`) on top of the
//! generated FFI layer (`ffi`) and our small C shim.
#![warn(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod core;
pub mod sync;

#[cfg(not(loom))]
mod agree;
#[cfg(not(loom))]
mod bootstrap;
#[cfg(not(loom))]
mod component;
#[cfg(not(loom))]
mod ffi;
#[cfg(not(loom))]
mod engine;
#[cfg(not(loom))]
mod hier;
#[cfg(not(loom))]
mod inter;
#[cfg(not(loom))]
mod topo;
#[cfg(not(loom))]
mod linear;
#[cfg(not(loom))]
mod module;
#[cfg(not(loom))]
mod p2p;
#[cfg(not(loom))]
pub mod params;
#[cfg(not(loom))]
mod pvar;
#[cfg(not(loom))]
mod report;
pub mod settings;
pub mod shm;
#[cfg(not(loom))]
pub mod wait;
