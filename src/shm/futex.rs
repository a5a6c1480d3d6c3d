//! Sleeping on a shared-memory word: Linux futexes, shared between
//! processes (not FUTEX_PRIVATE), with a timeout so that a sleeper still
//! turns MPI progress now and then. `Futex` is what the sleep protocol
//! needs of them, so that a model can stand in for the kernel under loom.

#[cfg(not(loom))]
use std::time::Duration;

use crate::sync::{AtomicI32, AtomicU32, Ordering};

/// A 32-bit word of shared memory that can be slept on.
pub trait Word {
    /// The word's bits, as the kernel compares them.
    fn bits(&self) -> u32;
    /// Its address, as the kernel identifies it.
    #[cfg(not(loom))]
    fn addr(&self) -> *const u32;
}

impl Word for AtomicU32 {
    fn bits(&self) -> u32 {
        self.load(Ordering::SeqCst)
    }
    #[cfg(not(loom))]
    fn addr(&self) -> *const u32 {
        self.as_ptr() as *const u32
    }
}

impl Word for AtomicI32 {
    fn bits(&self) -> u32 {
        self.load(Ordering::SeqCst) as u32
    }
    #[cfg(not(loom))]
    fn addr(&self) -> *const u32 {
        self.as_ptr() as *const u32
    }
}

/// Sleeping on words and waking their sleepers.
pub trait Futex {
    /// Sleeps while `word` holds `expected` (checking and going to sleep
    /// are one step as far as `wake_all` is concerned). Returns at once if
    /// the word already changed; may also return early for no reason.
    fn wait(&self, word: &impl Word, expected: u32);
    /// Wakes every sleeper on `word`.
    fn wake_all(&self, word: &impl Word);
}

/// The kernel's futexes; a sleep lasts at most `timeout`.
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub timeout: Duration,
}

#[cfg(not(loom))]
impl Futex for Kernel {
    fn wait(&self, word: &impl Word, expected: u32) {
        let ts = libc::timespec {
            tv_sec: self.timeout.as_secs() as libc::time_t,
            tv_nsec: self.timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT only reads the aligned 32-bit word, which lives
        // as long as the borrow; `ts` outlives the call.
        unsafe {
            libc::syscall(libc::SYS_futex, word.addr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec);
        }
    }

    fn wake_all(&self, word: &impl Word) {
        // SAFETY: FUTEX_WAKE does not access the word's memory beyond its address.
        unsafe {
            libc::syscall(libc::SYS_futex, word.addr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    const LONG: Kernel = Kernel { timeout: Duration::from_secs(10) };

    #[test]
    fn sleeper_is_woken_by_a_change() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while w2.load(Ordering::SeqCst) == 0 {
                LONG.wait(&*w2, 0);
            }
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        w.store(1, Ordering::SeqCst);
        LONG.wake_all(&*w);
        assert!(t.join().unwrap() < Duration::from_secs(5));
    }

    #[test]
    fn changed_word_does_not_sleep() {
        let w = AtomicU32::new(5);
        let t0 = std::time::Instant::now();
        LONG.wait(&w, 4);
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
}
