//! `intercomm <rounds>`: barrier, broadcast, scatter and allreduce on an
//! even/odd intercommunicator.

use crate::*;

/// Collectives on an intercommunicator between the even and the odd
/// ranks: hwbarr must decline it, and the components that serve it
/// (coll/inter under the default selection and the list hwbarr
/// recommends) must get barrier, broadcast, scatter and allreduce right.
pub fn run(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::{MPI_Allreduce, MPI_Barrier, MPI_Bcast, MPI_Scatter, RSMPI_INT32_T, RSMPI_PROC_NULL, RSMPI_SUM};
    use mpi::raw::AsRaw;
    /// MPI_ROOT, which rsmpi does not export (-4 in Open MPI's mpi.h).
    const MPI_ROOT: i32 = -4;
    let (me, n) = (world.rank(), world.size());
    let color = me % 2;
    let half = world.split_by_color(Color::with_value(color)).expect("split");
    let local = half.rank();
    // World ranks of the other group, in its local order.
    let remote: Vec<i32> = (0..n).filter(|r| r % 2 != color).collect();
    let mut inter = world.as_raw();
    // SAFETY: raw MPI calls on live communicators with buffers that outlive
    // each call; `inter` is an out-param freed below.
    unsafe {
        let rc = mpi::ffi::MPI_Intercomm_create(half.as_raw(), 0, world.as_raw(), 1 - color, 77, &mut inter);
        assert_eq!(rc, 0, "MPI_Intercomm_create");
        for round in 0..rounds as i32 {
            assert_eq!(MPI_Barrier(inter), 0);
            // Group 0's rank 0 is the root of the rooted collectives.
            let root = if color == 1 {
                0
            } else if local == 0 {
                MPI_ROOT
            } else {
                RSMPI_PROC_NULL
            };
            let mut v = if root == MPI_ROOT { 1000 + round } else { -1 };
            assert_eq!(MPI_Bcast((&mut v as *mut i32).cast(), 1, RSMPI_INT32_T, root, inter), 0);
            if color == 1 {
                assert_eq!(v, 1000 + round, "rank {me}: intercomm broadcast, round {round}");
            }
            let send: Vec<i32> = (0..remote.len() as i32).map(|i| 100 * round + i).collect();
            let mut got = -1;
            let rc = MPI_Scatter(
                send.as_ptr().cast(),
                1,
                RSMPI_INT32_T,
                (&mut got as *mut i32).cast(),
                1,
                RSMPI_INT32_T,
                root,
                inter,
            );
            assert_eq!(rc, 0, "MPI_Scatter");
            if color == 1 {
                assert_eq!(got, 100 * round + local, "rank {me}: intercomm scatter, round {round}");
            }
            // Each group gets the sum over the other group.
            let (mine, mut sum) = (me + round, -1);
            let rc = MPI_Allreduce(
                (&mine as *const i32).cast(),
                (&mut sum as *mut i32).cast(),
                1,
                RSMPI_INT32_T,
                RSMPI_SUM,
                inter,
            );
            assert_eq!(rc, 0, "MPI_Allreduce");
            let want: i32 = remote.iter().map(|r| r + round).sum();
            assert_eq!(sum, want, "rank {me}: intercomm allreduce, round {round}");
        }
        mpi::ffi::MPI_Comm_free(&mut inter);
    }
    println!("rank {me}: intercomm OK");
}
