//! `setups <rounds>`: MPI_THREAD_MULTIPLE, the first barriers of several
//! communicators at once. Per round the main thread makes one dup of
//! MPI_COMM_WORLD per thread (so that Open MPI's own messages for them
//! stay on one thread), then each thread runs three checked barriers on
//! its own dup: their first barriers run hwbarr's setup exchanges, whose
//! messages the threads of a rank send to the same peers at once. The main
//! thread frees the dups.

use crate::*;

/// Barriers per communicator: the first (the setup exchange) and two on
/// the device it set up.
const BARRIERS: u64 = 3;

pub fn run(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::*;
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    let threads: usize = std::env::var("HWBARR_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    assert!(threads <= SLOTS, "one board slot per thread");
    // Barriers entered per thread's slot, over every round.
    let mut counts = vec![0u64; threads];
    for _ in 0..rounds {
        let dups = world_dups(world, threads);
        std::thread::scope(|s| {
            for (slot, (comm, count)) in dups.iter().zip(counts.iter_mut()).enumerate() {
                let (board, comm) = (&board, Handle(comm.0));
                s.spawn(move || {
                    // The whole handle moves in (not its raw field alone).
                    let comm = comm;
                    for _ in 0..BARRIERS {
                        *count += 1;
                        let k = *count;
                        board.cell(slot, me).store(k, SeqCst);
                        // SAFETY: this thread's own live communicator.
                        assert_eq!(unsafe { MPI_Barrier(comm.0) }, 0);
                        // A dup of MPI_COMM_WORLD: its members are every world rank.
                        for q in 0..n {
                            let e = board.cell(slot, q).load(SeqCst);
                            if e < k {
                                eprintln!(
                                    "VIOLATION: world rank {me} left barrier {k} of slot {slot} before rank {q} \
                                     entered it (entered {e})"
                                );
                                std::process::exit(1);
                            }
                        }
                    }
                });
            }
        });
        for mut d in dups {
            // SAFETY: our dup, no operation pending on it.
            assert_eq!(unsafe { MPI_Comm_free(&mut d.0) }, 0);
        }
    }
    world.barrier();
    println!("setups OK: rank {me}, {threads} threads, {rounds} rounds");
}
