//! The barrier cores, in safe Rust and independent of Open MPI: they see
//! only atomics, wherever those live (a shared-memory segment in the
//! component, the heap in tests). A core never blocks: `arrive` enters a
//! barrier and `is_released` polls it, so the caller owns the waiting policy
//! (spin, yield, sleep, turn MPI progress) and non-blocking barriers fit.

pub mod counter;
pub mod line;
pub mod polled;
pub mod toggle;
