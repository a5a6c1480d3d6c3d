//! `semantics <iters>`: thousands of barriers with random per-rank delays
//! on MPI_COMM_WORLD, a dup, an even/odd split (same context id on both
//! halves), two overlapping subsets, each node's ranks (split_type
//! SHARED), and short-lived dups, interleaved with
//! allreduce and bcast. A board in a shared file ($HWBARR_BOARD) records
//! how many barriers each rank entered on each communicator; after every
//! barrier a rank checks that every member entered it. Exits 1 on a
//! violation.

use crate::*;

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    assert!(n <= MAX_RANKS);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((me as u64 + 1) * 0x1234_5678_9ABC));
    // MPI_COMM_WORLD itself (rsmpi's world handle is never freed), a dup,
    // an even/odd split, and two overlapping subsets.
    let mut tested = vec![Tested::new(SimpleCommunicator::world(), 0, me), Tested::new(world.duplicate(), 1, me)];
    if let Some(c) = world.split_by_color(Color::with_value((me % 2) as i32)) {
        tested.push(Tested::new(c, 2, me));
    }
    let head: Vec<i32> = (0..(n.max(2) - 1) as i32).collect();
    let tail: Vec<i32> = (1..n as i32).collect();
    for (slot, ranks) in [(3, head), (4, tail)] {
        let g = world.group().include(&ranks);
        if let Some(c) = world.split_by_subgroup_collective(&g) {
            tested.push(Tested::new(c, slot, me));
        }
    }
    // The ranks of our node (MPI_Comm_split_type SHARED): inside one node.
    tested.push(Tested::new(world.split_shared(0), 6, me));
    // Short-lived dups: context ids freed and reused; the count lives on.
    let mut short_count = 0;
    for i in 0..iters {
        for t in tested.iter_mut() {
            rng.delay();
            t.checked_barrier(&board, me);
            if i % 64 == 0 {
                t.other_collectives(i);
            }
        }
        if i % 100 == 0 {
            let mut t = Tested::new(world.duplicate(), 5, me);
            t.count = short_count;
            for _ in 0..3 {
                t.checked_barrier(&board, me);
            }
            short_count = t.count;
        }
    }
    println!("rank {me}: semantics OK ({} barriers on MPI_COMM_WORLD)", tested[0].count);
}
