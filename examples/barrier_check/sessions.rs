//! `sessions <iters>`: MPI Sessions (MPI 4.0; Open MPI 5.0 and later)
//! without MPI_Init: communicators made from the world process set's
//! groups, whose context ids differ between ranks, with checked barriers.

use std::ffi::{c_char, c_int, c_void, CStr};

use mpi::ffi::{MPI_Comm, MPI_Errhandler, MPI_Group, MPI_Info};
use mpi::raw::FromRaw;

use crate::*;

/// An `MPI_Session` handle (a pointer in Open MPI).
type Session = *mut c_void;

/// The Sessions calls, looked up at run time: the program is built for
/// Open MPI 4.1 too, which has none of them.
struct Api {
    init: unsafe extern "C" fn(MPI_Info, MPI_Errhandler, *mut Session) -> c_int,
    finalize: unsafe extern "C" fn(*mut Session) -> c_int,
    group_from_pset: unsafe extern "C" fn(Session, *const c_char, *mut MPI_Group) -> c_int,
    comm_from_group: unsafe extern "C" fn(MPI_Group, *const c_char, MPI_Info, MPI_Errhandler, *mut MPI_Comm) -> c_int,
}

fn sym<T: Copy>(name: &CStr) -> T {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    assert!(!p.is_null(), "{name:?} is not in this MPI library (MPI Sessions need Open MPI 5.0 or later)");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: T is the C signature of the symbol, a function pointer.
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}

/// Checked barriers on three communicators made from groups of one
/// session, no MPI_Init: the world set's group; the even or the odd ranks
/// (`half`); the world group again (`second`). Even ranks make `half`
/// before `second`, odd ranks after, so `second`'s local context id
/// differs between them (Open MPI's extended ids match them up). Then
/// every communicator is freed and the session finalized.
pub fn run(iters: u64) {
    let api = Api {
        init: sym(c"MPI_Session_init"),
        finalize: sym(c"MPI_Session_finalize"),
        group_from_pset: sym(c"MPI_Group_from_session_pset"),
        comm_from_group: sym(c"MPI_Comm_create_from_group"),
    };
    let board = Board::open();
    let mut session: Session = std::ptr::null_mut();
    // SAFETY: MPI calls with valid out-pointers, NUL-terminated strings and
    // handles made here; each communicator is wrapped once and freed (by
    // its drop) before the groups and the session.
    unsafe {
        let (info, fatal) = (mpi::ffi::RSMPI_INFO_NULL, mpi::ffi::RSMPI_ERRORS_ARE_FATAL);
        assert_eq!((api.init)(info, fatal, &mut session), 0, "MPI_Session_init");
        let mut world = mpi::ffi::RSMPI_GROUP_NULL;
        assert_eq!((api.group_from_pset)(session, c"mpi://WORLD".as_ptr(), &mut world), 0);
        let (mut me, mut n) = (0, 0);
        mpi::ffi::MPI_Group_rank(world, &mut me);
        mpi::ffi::MPI_Group_size(world, &mut n);
        let same_parity: Vec<i32> = (0..n).filter(|r| r % 2 == me % 2).collect();
        let mut half_group = mpi::ffi::RSMPI_GROUP_NULL;
        mpi::ffi::MPI_Group_incl(world, same_parity.len() as i32, same_parity.as_ptr(), &mut half_group);
        let make = |g: MPI_Group, tag: &CStr| {
            let mut c = mpi::ffi::RSMPI_COMM_NULL;
            assert_eq!((api.comm_from_group)(g, tag.as_ptr(), info, fatal, &mut c), 0, "MPI_Comm_create_from_group");
            SimpleCommunicator::from_raw(c)
        };
        let me = me as usize;
        let first = make(world, c"hwbarr.sessions.world");
        let (half, second) = if me.is_multiple_of(2) {
            let h = make(half_group, c"hwbarr.sessions.half");
            (h, make(world, c"hwbarr.sessions.second"))
        } else {
            let s = make(world, c"hwbarr.sessions.second");
            (make(half_group, c"hwbarr.sessions.half"), s)
        };
        let mut rng = Rng(0x5_DEEC_E66D ^ ((me as u64 + 5) * 0x9E37_79B9));
        let mut tested = vec![Tested::new(first, 0, me), Tested::new(second, 1, me), Tested::new(half, 2, me)];
        for i in 0..iters {
            for t in tested.iter_mut() {
                rng.delay();
                if i % 4 == 3 {
                    let k = t.enter(&board, me);
                    Raw::ibarrier(&t.comm).wait();
                    check_after(t, &board, me, k);
                } else {
                    t.checked_barrier(&board, me);
                }
                if i % 64 == 0 {
                    t.other_collectives(i);
                }
            }
        }
        let count = tested[0].count;
        drop(tested);
        mpi::ffi::MPI_Group_free(&mut half_group);
        mpi::ffi::MPI_Group_free(&mut world);
        assert_eq!((api.finalize)(&mut session), 0, "MPI_Session_finalize");
        println!("rank {me}: sessions OK ({count} barriers on the world group's communicator)");
    }
}
