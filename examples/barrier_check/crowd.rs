//! `crowd <iters>`: every rank starts its barriers on one CPU while its
//! affinity allows others, as an unbound launch sometimes places 2 ranks:
//! it pins itself to the first CPU its mask allows and gives the mask back,
//! which leaves it on that CPU. Then `iters` checked barriers (no delays);
//! each rank says the CPU it started on and the one it ended on
//! (`rank R: crowd from A to B`). With fewer than 2 CPUs allowed it says so
//! and runs the barriers where it is.

use crate::*;
use mca_coll_hwbarr::shm::sched;

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut t = Tested::new(world.duplicate(), 0, me);
    t.checked_barrier(&board, me); // the device is set up before the ranks crowd
    let allowed = sched::affinity().filter(|set| sched::cpus(set).count() > 1);
    match allowed {
        // Pinned to its first CPU, then every CPU allowed again: it stays
        // on that one.
        Some(set) => {
            let first = sched::cpus(&set).next().expect("a CPU");
            assert!(sched::pin_to(first), "pin to CPU {first}");
            assert!(sched::set_affinity(&set), "unpin");
        }
        None => println!("rank {me}: crowd: fewer than 2 CPUs allowed"),
    }
    let cpu = || sched::current_cpu().map_or(-1, |c| c as i64);
    let from = cpu();
    world.barrier(); // every rank has crowded before the checked barriers
    for _ in 0..iters {
        t.checked_barrier(&board, me);
    }
    println!("rank {me}: crowd from {from} to {}", cpu());
    world.barrier();
    println!("rank {me}: crowd OK");
}
