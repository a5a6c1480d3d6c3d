//! `spawn <iters>`: the job spawns as many ranks again (MPI_Comm_spawn),
//! parents and children merge into one communicator, and run checked
//! barriers of every kind on it.

use crate::*;
use mpi::topology::{InterCommunicator, MergeOrder};

/// Ranks of two jobs on one communicator: the count of the job's ranks on
/// the node (mpirun's `OMPI_COMM_WORLD_LOCAL_SIZE`, Open MPI's own) sees
/// only half of them, so hwbarr must count the communicator's own ranks to know
/// whether they outnumber the cores. Every barrier is checked on the board
/// (indexed by rank in the merged communicator); MPI_Ibarrier and the
/// persistent barrier run too, and the intercommunicator's barrier (which
/// hwbarr declines) between the two jobs.
pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let (inter, child) = match world.parent() {
        Some(parent) => (parent, true),
        None => {
            let mut cmd = std::process::Command::new(std::env::current_exe().expect("own path"));
            cmd.args(["spawn", &iters.to_string()]);
            let inter = world.process_at_rank(0).spawn(&cmd, world.size()).expect("MPI_Comm_spawn");
            (inter, false)
        }
    };
    let (me, count) = checked_on_merged(&inter, child, iters, &board);
    inter.barrier();
    let who = if child { "child" } else { "parent" };
    println!("rank {me} ({who}): spawn OK ({count} barriers on the merged communicator)");
}

/// Merges `inter` (`high`: this side's ranks come second) and runs `iters`
/// barriers of every kind on the merged communicator, each checked on
/// `board` (indexed by merged rank); returns this rank's place in the
/// merged communicator and the barriers run.
pub fn checked_on_merged(inter: &InterCommunicator, high: bool, iters: u64, board: &Board) -> (usize, u64) {
    let merged = inter.merge(if high { MergeOrder::High } else { MergeOrder::Low });
    let me = merged.rank() as usize;
    assert!(merged.size() as usize <= MAX_RANKS);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ ((me as u64 + 1) * 0x9E37_79B9));
    let mut t = Tested::new(merged, 7, me);
    let mut p = Raw::persistent(&t.comm);
    for i in 0..iters {
        rng.delay();
        if i % 3 == 0 {
            t.checked_barrier(board, me);
        } else {
            let k = t.enter(board, me);
            if i % 3 == 1 {
                Raw::ibarrier(&t.comm).wait();
            } else {
                p.start();
                p.wait();
            }
            check_after(&t, board, me, k);
        }
        if i % 64 == 0 {
            t.other_collectives(i);
        }
    }
    p.free();
    (me, t.count)
}
