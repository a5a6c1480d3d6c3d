//! `pvar <iters>`: reads hwbarr's MPI_T performance variable
//! `coll_hwbarr_barriers` bound to a fresh dup (after `iters` MPI_Barrier
//! and `iters` MPI_Ibarrier on it) and to MPI_COMM_SELF (never served by
//! hwbarr), and prints both values.

use crate::*;

pub fn run(world: &SimpleCommunicator, iters: u64) {
    use mpi::ffi::*;
    use mpi::raw::AsRaw;
    let me = world.rank();
    let mut provided = 0;
    // SAFETY: plain MPI_T calls with valid out-pointers; handles are used
    // only while their communicators live, then freed.
    unsafe {
        assert_eq!(MPI_T_init_thread(RSMPI_THREAD_SINGLE, &mut provided), 0);
        let mut idx = -1;
        let rc = MPI_T_pvar_get_index(c"coll_hwbarr_barriers".as_ptr(), MPI_T_PVAR_CLASS_COUNTER as i32, &mut idx);
        if rc != 0 {
            println!("rank {me}: pvar coll_hwbarr_barriers missing (rc {rc})");
            MPI_T_finalize();
            return;
        }
        let d = world.duplicate();
        let mut session: MPI_T_pvar_session = std::mem::zeroed();
        assert_eq!(MPI_T_pvar_session_create(&mut session), 0);
        let bind = |mut comm: MPI_Comm| {
            let mut h: MPI_T_pvar_handle = std::mem::zeroed();
            let mut count = 0;
            let rc = MPI_T_pvar_handle_alloc(session, idx, (&mut comm as *mut MPI_Comm).cast(), &mut h, &mut count);
            assert_eq!((rc, count), (0, 1), "handle alloc");
            h
        };
        let read = |h: MPI_T_pvar_handle| {
            let mut v: u64 = u64::MAX;
            assert_eq!(MPI_T_pvar_read(session, h, (&mut v as *mut u64).cast()), 0, "pvar read");
            v
        };
        let hd = bind(d.as_raw());
        let hs = bind(RSMPI_COMM_SELF);
        let at_bind = read(hd);
        for _ in 0..iters {
            d.barrier();
        }
        for _ in 0..iters {
            let mut r = RSMPI_REQUEST_NULL;
            assert_eq!(MPI_Ibarrier(d.as_raw(), &mut r), 0);
            assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0);
        }
        MPI_Barrier(RSMPI_COMM_SELF);
        println!("rank {me}: pvar dup={} self={} at_bind={at_bind}", read(hd), read(hs));
        let (mut hd, mut hs) = (hd, hs);
        MPI_T_pvar_handle_free(session, &mut hd);
        MPI_T_pvar_handle_free(session, &mut hs);
        MPI_T_pvar_session_free(&mut session);
        MPI_T_finalize();
    }
}
