//! `contention::yield_and_tell` against the kernel: a yield tells whether
//! another task ran. Its own test binary, so that no other test's threads
//! compete for the CPU it pins itself to.
#![cfg(not(loom))]

use std::sync::atomic::Ordering::Relaxed;

use mca_coll_hwbarr::shm::sched::yield_and_tell;

/// A yield with a task ready on this thread's core switches to it; one
/// with nobody else on the core does not. Pinned to one CPU, with a
/// busy thread pinned beside it; skipped where pinning is refused.
#[test]
fn a_yield_tells_whether_another_task_ran() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    fn pin(cpu: usize) -> bool {
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
        // sched_setaffinity get valid pointers to it.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut s);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &s) == 0
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if !pin(0) {
                return None;
            }
            let alone = (0..1000).filter(|_| yield_and_tell()).count();
            let busy = {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    pin(0);
                    while !stop.load(Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            };
            std::thread::sleep(std::time::Duration::from_millis(20));
            let beside = (0..1000).filter(|_| yield_and_tell()).count();
            stop.store(true, Relaxed);
            busy.join().unwrap();
            Some((alone, beside))
        })
    };
    let Some((alone, beside)) = t.join().unwrap() else { return };
    // Alone, a stray task (the test harness's other threads) may run
    // now and then; beside a busy thread, far more often.
    assert!(beside > 50 && beside > 4 * alone.max(1), "alone {alone}, beside a busy thread {beside}");
}
