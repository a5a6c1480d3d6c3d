//! Atomics used by the barrier cores: std's in the component, loom's when
//! the cores are model-checked (`RUSTFLAGS="--cfg loom"`).

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Lets a spinning waiter give way; under loom this is what lets the model
/// checker schedule the other threads.
#[inline]
pub fn relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Between SeqCst accesses whose order a protocol relies on: two loads
/// against a SeqCst fence elsewhere (`shm::sleep::line_wake`), or a store
/// then a load against the mirror pair in another thread
/// (`express::Watch`). C++20, and so Rust, orders SeqCst accesses with each
/// other and with SeqCst fences, at no extra cost on x86; loom models
/// SeqCst loads as acquire only (its README, "Unsupported features") but
/// supports SeqCst fences, so under loom this is the fence that gives the
/// same guarantee, and the model checks the protocol.
#[inline]
pub fn seq_cst_loads() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// One value alone on its cache line(s), so that ranks spinning on their own
/// word do not slow down the writers of a neighbouring word (false sharing).
/// 128 bytes: two 64-byte lines, because x86 prefetches lines in pairs.
#[repr(C, align(128))]
#[derive(Default)]
pub struct Line<T>(pub T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
