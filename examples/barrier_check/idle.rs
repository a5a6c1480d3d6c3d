//! `idle <ms>`: rank 0 computes for `ms` milliseconds before it enters a
//! barrier; every other rank enters at once and says how much CPU its
//! thread used while it waited (`rank R: waited W us, cpu C us`), which
//! shows whether a waiter gives its core up during a long wait.

use crate::*;

/// This thread's CPU time.
fn thread_cpu() -> std::time::Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

pub fn run(world: &SimpleCommunicator, ms: u64) {
    let me = world.rank();
    world.barrier(); // the device is set up before anything is timed
    let (wall, cpu) = (std::time::Instant::now(), thread_cpu());
    if me == 0 {
        let until = wall + std::time::Duration::from_millis(ms);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    world.barrier();
    let (waited, used) = (wall.elapsed(), thread_cpu() - cpu);
    if me != 0 {
        println!("rank {me}: waited {} us, cpu {} us", waited.as_micros(), used.as_micros());
    }
    world.barrier();
    println!("rank {me}: idle OK");
}
