//! `lifecycle <rounds>`: communicators freed with a barrier pending,
//! refused frees of pending requests, MPI_Finalize with one in flight
//! (`$HWBARR_LIFECYCLE`, `$HWBARR_FIRST`).

use crate::*;

/// Communicators freed while a barrier on them is pending, the erroneous
/// free of a pending barrier's request, and MPI_Finalize with barriers in
/// flight. MPI_Comm_free only marks a communicator for deallocation:
/// pending operations on it complete normally (MPI 4.1, 7.4.3); freeing a
/// pending collective's request or cancelling it is erroneous and returns
/// an error (MPI_ERRORS_RETURN on MPI_COMM_WORLD, where MPI_Request_free
/// reports). `$HWBARR_LIFECYCLE`: `free-then-wait` (MPI_Comm_free, then
/// MPI_Wait), `request-free` (MPI_Request_free and MPI_Cancel refused,
/// MPI_Comm_free, MPI_Wait), `finalize` (as request-free, but the last
/// round's barrier is never waited for: MPI_Finalize with it in flight,
/// rank 0 late). `$HWBARR_FIRST`: the dup's first operation is the pending
/// one (`nonblocking`, `persistent`: the first exchange is in flight when
/// the communicator is freed), or a blocking barrier comes first
/// (`blocking`: the device, or the linear fallback, is set up).
pub fn run(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::*;
    use mpi::raw::AsRaw;
    let me = world.rank();
    let case = std::env::var("HWBARR_LIFECYCLE").unwrap_or_else(|_| "free-then-wait".into());
    let first = std::env::var("HWBARR_FIRST").unwrap_or_else(|_| "nonblocking".into());
    let mut rng = Rng(0x11FE_C1C1 ^ ((me as u64 + 9) * 0x9E37_79B9));
    // SAFETY: raw MPI calls on live communicators and requests of ours.
    unsafe {
        assert_eq!(MPI_Comm_set_errhandler(world.as_raw(), RSMPI_ERRORS_RETURN), 0);
        for round in 0..rounds {
            let mut d = RSMPI_COMM_NULL;
            assert_eq!(MPI_Comm_dup(world.as_raw(), &mut d), 0);
            assert_eq!(MPI_Comm_set_errhandler(d, RSMPI_ERRORS_RETURN), 0);
            if first == "blocking" {
                assert_eq!(MPI_Barrier(d), 0);
            }
            rng.delay();
            let last = round + 1 == rounds;
            if me == 0 && (last || rng.next().is_multiple_of(4)) {
                std::thread::sleep(std::time::Duration::from_millis(if last { 50 } else { 2 }));
            }
            let mut r = RSMPI_REQUEST_NULL;
            let persistent = first == "persistent";
            if persistent {
                assert_eq!(barrier_init::barrier_init(d, RSMPI_INFO_NULL, &mut r), 0);
                assert_eq!(MPI_Start(&mut r), 0);
            } else {
                assert_eq!(MPI_Ibarrier(d, &mut r), 0);
            }
            if case != "free-then-wait" {
                // Erroneous while the barrier is pending: refused, and the
                // request stays valid. (It may have completed already here
                // on a rank that came last: then the free is legal.)
                let mut flag = 0;
                assert_eq!(MPI_Request_get_status(r, &mut flag, RSMPI_STATUS_IGNORE), 0);
                if flag == 0 {
                    let mut copy = r;
                    let rc = MPI_Request_free(&mut copy);
                    assert_ne!(rc, 0, "rank {me}: MPI_Request_free of a pending barrier accepted");
                    assert!(copy == r, "rank {me}: a refused MPI_Request_free cleared the handle");
                    assert_ne!(MPI_Cancel(&mut r), 0, "rank {me}: MPI_Cancel of a pending barrier accepted");
                }
            }
            assert_eq!(MPI_Comm_free(&mut d), 0);
            if case == "finalize" && last {
                // Into MPI_Finalize with the barrier in flight.
                break;
            }
            rng.delay();
            assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0, "rank {me}: barrier on a freed communicator");
            if persistent {
                assert_eq!(MPI_Request_free(&mut r), 0);
            }
        }
    }
    println!("rank {me}: lifecycle {case} first={first} OK ({rounds} rounds)");
}
