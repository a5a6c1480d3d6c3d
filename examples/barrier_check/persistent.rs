//! `persistent <iters>`: MPI(X)_Barrier_init + MPI_Start/MPI_Wait (or Test
//! loops) with random delays, checked on the board; inactive and freed
//! requests. With `HWBARR_PERSISTENT_ONLY` set, no blocking barrier
//! between starts: every wait is Open MPI's (MPI_Wait, MPI_Test). With
//! `HWBARR_NO_DELAY` set, no random delays: a tight loop of starts.

use crate::*;

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut rng = Rng(0x1234_5678 ^ ((me as u64 + 3) * 0x9E37_79B9));
    let mut t = Tested::new(world.duplicate(), 0, me);
    // Inactive requests: waiting returns at once; freeing without a start.
    let mut idle = Raw::persistent(&t.comm);
    idle.wait();
    idle.free();
    let mut p = Raw::persistent(&t.comm);
    let only = std::env::var_os("HWBARR_PERSISTENT_ONLY").is_some();
    let tight = std::env::var_os("HWBARR_NO_DELAY").is_some();
    for i in 0..iters {
        if !tight {
            rng.delay();
        }
        t.enter(&board, me);
        p.start();
        if i % 2 == 0 {
            p.wait();
        } else {
            while !p.test() {}
        }
        check_after(&t, &board, me, t.count);
        if i % 100 == 0 && !only {
            p.wait(); // inactive again: returns at once
            t.checked_barrier(&board, me); // blocking barrier between starts
        }
    }
    p.free();
    println!("rank {me}: persistent OK ({} starts)", iters);
}
