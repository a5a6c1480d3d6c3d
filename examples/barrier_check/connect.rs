//! `accept <iters>` and `connect <iters>`: two jobs started by separate
//! mpiruns join (MPI_Comm_accept / MPI_Comm_connect through a name
//! published on Open MPI's name server), merge, and run checked barriers of
//! every kind on the merged communicator, as `spawn` does.

use std::ffi::{c_char, CStr};

use crate::*;
use mpi::raw::FromRaw;
use mpi::topology::InterCommunicator;

/// MPI_Comm_accept and MPI_Comm_connect: (port, info, root, comm, newcomm).
type JoinFn =
    unsafe extern "C" fn(*const c_char, mpi::ffi::MPI_Info, i32, mpi::ffi::MPI_Comm, *mut mpi::ffi::MPI_Comm) -> i32;

/// The name the accepting job publishes its port under.
const SERVICE: &CStr = c"hwbarr-barrier-check";

/// Open MPI 4.1 takes the other job's ranks for remote (it has no
/// locality for them), so hwbarr finds them on its node only by its own
/// layout exchange, and must then wait as the node's rank count says.
/// The accepting job writes the file $HWBARR_READY once its name is
/// published, so that the test starts the connecting job after it.
pub fn run(world: &SimpleCommunicator, iters: u64, accept: bool) {
    let board = Board::open();
    let mut port = [0 as c_char; mpi::ffi::MPI_MAX_PORT_NAME as usize + 1];
    let mut inter = std::mem::MaybeUninit::uninit();
    // SAFETY: MPI calls with valid buffers (the port name fits
    // MPI_MAX_PORT_NAME) and a communicator of this job; only rank 0 of
    // the accepting job opens and publishes the port, as the root of the
    // collective accept.
    unsafe {
        if !accept {
            assert_eq!(mpi::ffi::MPI_Lookup_name(SERVICE.as_ptr(), mpi::ffi::RSMPI_INFO_NULL, port.as_mut_ptr()), 0);
        } else if world.rank() == 0 {
            assert_eq!(mpi::ffi::MPI_Open_port(mpi::ffi::RSMPI_INFO_NULL, port.as_mut_ptr()), 0);
            assert_eq!(mpi::ffi::MPI_Publish_name(SERVICE.as_ptr(), mpi::ffi::RSMPI_INFO_NULL, port.as_ptr()), 0);
            let ready = std::env::var("HWBARR_READY").expect("HWBARR_READY");
            std::fs::write(ready, b"published\n").expect("write the ready file");
        }
        let (join, name) = if accept {
            (mpi::ffi::MPI_Comm_accept as JoinFn, "MPI_Comm_accept")
        } else {
            (mpi::ffi::MPI_Comm_connect as JoinFn, "MPI_Comm_connect")
        };
        let rc = join(port.as_ptr(), mpi::ffi::RSMPI_INFO_NULL, 0, world.as_raw(), inter.as_mut_ptr());
        assert_eq!(rc, 0, "{name}");
    }
    // SAFETY: MPI_Comm_accept/connect returned an intercommunicator.
    let inter = unsafe { InterCommunicator::from_raw(inter.assume_init()) };
    let (me, count) = spawn::checked_on_merged(&inter, !accept, iters, &board);
    inter.barrier();
    let who = if accept { "accepting" } else { "connecting" };
    println!("rank {me} ({who}): connect OK ({count} barriers on the merged communicator)");
    // SAFETY: disconnect the joined jobs before MPI_Finalize (rsmpi's drop
    // would free the handle MPI_Comm_disconnect releases, hence the
    // forget); rank 0 of the accepting job withdraws its name and closes
    // its port.
    unsafe {
        let mut raw = inter.as_raw();
        std::mem::forget(inter);
        assert_eq!(mpi::ffi::MPI_Comm_disconnect(&mut raw), 0);
        if accept && world.rank() == 0 {
            assert_eq!(mpi::ffi::MPI_Unpublish_name(SERVICE.as_ptr(), mpi::ffi::RSMPI_INFO_NULL, port.as_ptr()), 0);
            assert_eq!(mpi::ffi::MPI_Close_port(port.as_ptr()), 0);
        }
    }
}
