//! `crowd <iters>`: every rank starts its barriers on one CPU while its
//! affinity allows others, as an unbound launch sometimes places 2 ranks:
//! it pins itself to the first CPU its mask allows and gives the mask back,
//! which leaves it on that CPU. Then `iters` checked barriers (no delays);
//! each rank says the CPU it started on and the one it ended on
//! (`rank R: crowd from A to B`). With fewer than 2 CPUs allowed it says so
//! and runs the barriers where it is.

use crate::*;

/// The first CPU this thread may run on, if the kernel says and there is
/// another one besides it.
fn first_of_several() -> Option<(usize, libc::cpu_set_t)> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity gets a
    // valid pointer to it and its size; CPU_ISSET and CPU_COUNT read it.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 || libc::CPU_COUNT(&allowed) < 2 {
            return None;
        }
        (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &allowed)).map(|c| (c, allowed))
    }
}

fn cpu() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::sched_getcpu() }
}

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut t = Tested::new(world.duplicate(), 0, me);
    t.checked_barrier(&board, me); // the device is set up before the ranks crowd
    match first_of_several() {
        Some((first, allowed)) => {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: zeroed is empty; CPU_SET sets a bit below CPU_SETSIZE;
            // sched_setaffinity gets valid pointers to sets of `size` bytes.
            // The first call moves this thread to `first`, the second allows
            // every CPU again and leaves it there.
            unsafe {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(first, &mut one);
                assert_eq!(libc::sched_setaffinity(0, size, &one), 0, "pin to CPU {first}");
                assert_eq!(libc::sched_setaffinity(0, size, &allowed), 0, "unpin");
            }
        }
        None => println!("rank {me}: crowd: fewer than 2 CPUs allowed"),
    }
    let from = cpu();
    world.barrier(); // every rank has crowded before the timed barriers
    for _ in 0..iters {
        t.checked_barrier(&board, me);
    }
    println!("rank {me}: crowd from {from} to {}", cpu());
    world.barrier();
    println!("rank {me}: crowd OK");
}
