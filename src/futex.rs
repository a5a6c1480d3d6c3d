//! Sleeping on a shared-memory word: Linux futexes, shared between
//! processes (not FUTEX_PRIVATE), with a timeout so that a sleeper still
//! turns MPI progress now and then.

use std::time::Duration;

use crate::sync::{AtomicI32, AtomicU32};

/// A 32-bit word of shared memory that can be slept on.
pub trait FutexWord {
    fn addr(&self) -> *const u32;
}

impl FutexWord for AtomicU32 {
    fn addr(&self) -> *const u32 {
        self.as_ptr() as *const u32
    }
}

impl FutexWord for AtomicI32 {
    fn addr(&self) -> *const u32 {
        self.as_ptr() as *const u32
    }
}

/// Sleeps while `word` still holds `expected`, at most `timeout`. Returns at
/// once if the word already changed; spurious wake-ups are possible.
pub fn wait(word: &impl FutexWord, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT only reads the aligned 32-bit word, which lives as
    // long as the borrow; `ts` outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.addr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every process sleeping on `word`.
pub fn wake_all(word: &impl FutexWord) {
    // SAFETY: FUTEX_WAKE does not access the word's memory beyond its address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.addr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn sleeper_is_woken_by_a_change() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while w2.load(Ordering::SeqCst) == 0 {
                wait(&*w2, 0, Duration::from_secs(10));
            }
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        w.store(1, Ordering::SeqCst);
        wake_all(&*w);
        assert!(t.join().unwrap() < Duration::from_secs(5));
    }

    #[test]
    fn changed_word_does_not_sleep() {
        let w = AtomicU32::new(5);
        let t0 = std::time::Instant::now();
        wait(&w, 4, Duration::from_secs(10));
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
}
