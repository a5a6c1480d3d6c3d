//! `shm::sched` against the kernel: a yield tells whether another task
//! ran, and a thread makes room where its affinity allows. Its own test
//! binary, so that no other test's threads compete for the CPU it pins
//! itself to.
#![cfg(not(loom))]

use std::sync::atomic::Ordering::Relaxed;

use mca_coll_hwbarr::shm::sched::{self, make_room, yield_and_tell, Aside};

/// A yield with a task ready on this thread's core switches to it; one
/// with nobody else on the core does not. Pinned to the first CPU it may
/// run on, with a busy thread pinned beside it. Skipped where pinning is
/// refused; inconclusive (said, not failed) where the CPU is busy with
/// other programs already, so that yields alone switch often too.
#[test]
fn a_yield_tells_whether_another_task_ran() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let Some(cpu) = sched::affinity().and_then(|set| sched::cpus(&set).next()) else { return };
    let pin = move || sched::pin_to(cpu);
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if !pin() {
                return None;
            }
            let alone = (0..1000).filter(|_| yield_and_tell()).count();
            let busy = {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    pin();
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
    if alone > 100 {
        eprintln!("inconclusive: CPU {cpu} is busy already (alone {alone} of 1000 yields switched, beside {beside})");
        return;
    }
    // Alone, a stray task may run now and then; beside a busy thread, far
    // more often (about 350 in 1,000 on the test machine).
    assert!(beside > 50 && beside > 4 * alone.max(1), "alone {alone}, beside a busy thread {beside}");
}

/// `make_room`: a thread whose affinity allows several CPUs moves off the
/// one it runs on when asked and keeps its affinity; asked to stay, it
/// stays; pinned to one CPU, it has nowhere to go. On a thread of its own,
/// whose affinity it changes.
#[test]
fn a_thread_makes_room_where_its_affinity_allows() {
    std::thread::spawn(|| {
        let before = sched::affinity().expect("this thread's affinity");
        let allowed: Vec<usize> = sched::cpus(&before).collect();
        if allowed.len() < 2 {
            eprintln!("skipped: one CPU allowed");
            return;
        }
        assert_eq!(make_room(false), Aside::Stayed);
        for _ in 0..5 {
            // `Moved` says the thread ran elsewhere right after the move.
            assert_eq!(make_room(true), Aside::Moved);
            let after = sched::affinity().expect("this thread's affinity");
            assert_eq!(sched::cpus(&after).collect::<Vec<_>>(), allowed, "affinity given back");
        }
        let at = sched::current_cpu().expect("the CPU this thread runs on");
        assert!(sched::pin_to(at));
        assert_eq!(make_room(true), Aside::Nowhere, "pinned: nowhere to go");
        assert_eq!(make_room(false), Aside::Nowhere);
    })
    .join()
    .unwrap();
}
