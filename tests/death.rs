//! A rank dies (SIGKILL, MPI_Abort) while the others wait: the job ends within 10 s.

mod common;
use common::*;

/// SIGKILL or MPI_Abort of one rank while the others wait in MPI_Barrier,
/// in MPI_Wait on an MPI_Ibarrier or on a persistent barrier, at 2 ranks
/// (spinning, and asleep on the futex with idle=sleep), 4 and 8 ranks (8
/// on 2 cores sleeps by itself): the job ends within 10 s, leaving nothing.
#[test]
fn death_while_others_wait_ends_the_job_within_10_s() {
    for (np, mca) in [(2, &[][..]), (2, &[("coll_hwbarr_idle", "sleep")][..]), (4, &[][..]), (8, &[][..])] {
        for how in ["kill", "abort"] {
            for wait in WAITS {
                death_job(np, how, wait, mca, None, None);
            }
        }
    }
}

/// The same across fake nodes (2+2): the dying rank is a node leader
/// (rank 2) or not (rank 3), with the others waiting in each kind.
#[test]
fn fake_nodes_death_while_others_wait_ends_the_job_within_10_s() {
    for how in ["kill", "abort"] {
        for wait in WAITS {
            for victim in [2, 3] {
                death_job(4, how, wait, &[("coll_hwbarr_idle", "sleep")], Some("nodea:2,nodeb:2"), Some(victim));
            }
        }
    }
}
