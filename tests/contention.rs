//! `contention::yield_and_tell` against the kernel: a yield tells whether
//! another task ran. Its own test binary, so that no other test's threads
//! compete for the CPU it pins itself to.
#![cfg(not(loom))]

use std::sync::atomic::Ordering::Relaxed;

use mca_coll_hwbarr::shm::sched::yield_and_tell;

/// A yield with a task ready on this thread's core switches to it; one
/// with nobody else on the core does not. Pinned to the first CPU it may
/// run on, with a busy thread pinned beside it. Skipped where pinning is
/// refused; inconclusive (said, not failed) where the CPU is busy with
/// other programs already, so that yields alone switch often too.
#[test]
fn a_yield_tells_whether_another_task_ran() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity gets a
    // valid pointer to it and its size.
    let first = unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, size, &mut allowed) == 0)
            .then(|| (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &allowed)))
            .flatten()
    };
    let Some(cpu) = first else { return };
    let pin = move || {
        // SAFETY: as above; CPU_SET and sched_setaffinity get valid
        // pointers to the set.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut s);
            libc::sched_setaffinity(0, size, &s) == 0
        }
    };
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
    use mca_coll_hwbarr::shm::sched::{make_room, Aside};
    let size = std::mem::size_of::<libc::cpu_set_t>();
    let affinity = move || {
        // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity
        // gets a valid pointer to it and its size.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, size, &mut s), 0);
            s
        }
    };
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = || unsafe { libc::sched_getcpu() };
    std::thread::spawn(move || {
        let before = affinity();
        // SAFETY: CPU_COUNT reads an initialised set.
        if unsafe { libc::CPU_COUNT(&before) } < 2 {
            eprintln!("skipped: one CPU allowed");
            return;
        }
        let at = cpu();
        assert_eq!(make_room(false), Aside::Stayed);
        for _ in 0..5 {
            let at = cpu();
            assert_eq!(make_room(true), Aside::Moved);
            assert_ne!(cpu(), at, "moved");
            // SAFETY: CPU_EQUAL reads two initialised sets.
            assert!(unsafe { libc::CPU_EQUAL(&affinity(), &before) }, "affinity given back");
        }
        // Pinned to the CPU it is on: nowhere to go.
        // SAFETY: zeroed is empty; CPU_SET sets a bit below CPU_SETSIZE;
        // sched_setaffinity gets a valid pointer to a set of `size` bytes.
        unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(at as usize, &mut one);
            assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
        }
        assert_eq!(make_room(true), Aside::Nowhere);
        assert_eq!(make_room(false), Aside::Nowhere);
    })
    .join()
    .unwrap();
}
