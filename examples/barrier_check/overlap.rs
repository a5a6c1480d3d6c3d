//! `overlap <rounds>`: on fresh dups, rank 0 starts two MPI_Ibarrier and an
//! MPI_Ibcast before it waits for any; the others wait for the first
//! ibarrier before they start the rest (legal: the same order of
//! collectives on every rank). Every rank checks the broadcast value.
//! Meant for the device refused: rank 0's second ibarrier, queued behind
//! the first exchange, must not change the order in which the ranks'
//! non-blocking collectives take their tags (it did when libnbc served it).

use crate::*;

pub fn run(world: &SimpleCommunicator, rounds: u64) {
    use mpi::raw::AsRaw;
    let me = world.rank();
    for round in 0..rounds {
        let dup = world.duplicate();
        let mut value: i32 = if me == 0 { 1000 + round as i32 } else { -1 };
        let mut first = Raw::ibarrier(&dup);
        if me != 0 {
            first.wait();
        }
        let second = Raw::ibarrier(&dup);
        // SAFETY: MPI_REQUEST_NULL is a valid initial value; `value` stays
        // alive and untouched until the request completes below.
        let mut bcast = Raw(unsafe { mpi::ffi::RSMPI_REQUEST_NULL });
        // SAFETY: as above; live communicator, one MPI_INT at root 0.
        let rc = unsafe {
            mpi::ffi::MPI_Ibcast(
                (&mut value as *mut i32).cast(),
                1,
                mpi::ffi::RSMPI_INT32_T,
                0,
                dup.as_raw(),
                &mut bcast.0,
            )
        };
        assert_eq!(rc, 0);
        let mut reqs = if me == 0 { vec![first, second, bcast] } else { vec![second, bcast] };
        wait_all(&mut reqs);
        assert_eq!(value, 1000 + round as i32, "rank {me}: broadcast value in round {round}");
    }
    println!("rank {me}: overlap OK ({rounds} rounds)");
}
