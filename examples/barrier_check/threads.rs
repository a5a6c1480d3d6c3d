//! `threads <rounds>`: MPI_THREAD_MULTIPLE, threads each creating and
//! freeing communicators of their own, with bursts of non-blocking and
//! persistent barriers on them.

use crate::*;

/// Non-blocking barriers, and starts of a persistent one, per round.
const BURST: usize = 20;

/// MPI_THREAD_MULTIPLE: `$HWBARR_THREADS` threads per rank (default 4),
/// each creating, using and freeing communicators of its own (dups of a
/// per-thread parent, so that every rank's thread k meets thread k), with
/// blocking and non-blocking barriers: per round one MPI_Ibarrier, then
/// `BURST` more and as many starts of a persistent barrier, completed by
/// MPI_Wait or MPI_Test loops, while the other threads' progress passes
/// poll (and may complete) this thread's barriers. With the device
/// refused, every new communicator's fallback message is printed while
/// other threads print theirs.
pub fn run(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::*;
    let me = world.rank();
    let n: usize = std::env::var("HWBARR_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let parents = world_dups(world, n);
    let joins: Vec<_> = parents
        .into_iter()
        .enumerate()
        .map(|(k, parent)| {
            std::thread::spawn(move || {
                let mut parent = parent;
                let mut rng = Rng(0x7EAD_0001 ^ (((me as u64 + 1) * 131 + k as u64) * 0x9E37_79B9));
                // SAFETY: raw MPI calls on this thread's own communicators.
                unsafe {
                    for _ in 0..rounds {
                        let mut d = parent.0;
                        assert_eq!(MPI_Comm_dup(parent.0, &mut d), 0);
                        rng.delay();
                        assert_eq!(MPI_Barrier(d), 0);
                        let mut r = RSMPI_REQUEST_NULL;
                        assert_eq!(MPI_Ibarrier(d, &mut r), 0);
                        assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0);
                        let mut p = RSMPI_REQUEST_NULL;
                        assert_eq!(barrier_init::barrier_init(d, RSMPI_INFO_NULL, &mut p), 0);
                        for i in 0..2 * BURST {
                            let req = if i % 2 == 0 {
                                assert_eq!(MPI_Ibarrier(d, &mut r), 0);
                                &mut r
                            } else {
                                assert_eq!(MPI_Start(&mut p), 0);
                                &mut p
                            };
                            if i % 4 < 2 {
                                assert_eq!(MPI_Wait(req, RSMPI_STATUS_IGNORE), 0);
                            } else {
                                let mut flag = 0;
                                while flag == 0 {
                                    assert_eq!(MPI_Test(req, &mut flag, RSMPI_STATUS_IGNORE), 0);
                                }
                            }
                        }
                        assert_eq!(MPI_Request_free(&mut p), 0);
                        assert_eq!(MPI_Comm_free(&mut d), 0);
                    }
                    assert_eq!(MPI_Comm_free(&mut parent.0), 0);
                }
            })
        })
        .collect();
    for j in joins {
        j.join().expect("a thread failed");
    }
    println!("rank {me}: threads OK ({n} threads, {rounds} rounds)");
}
