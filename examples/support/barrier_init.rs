//! The persistent barrier under the name the running Open MPI gives it:
//! `MPI_Barrier_init` (MPI 4.0, Open MPI 5.0) or `MPIX_Barrier_init`
//! (Open MPI 4.1's pcollreq extension). Looked up at run time so that one
//! test program source works with both release lines.

use std::sync::OnceLock;

type BarrierInit = unsafe extern "C" fn(mpi::ffi::MPI_Comm, mpi::ffi::MPI_Info, *mut mpi::ffi::MPI_Request) -> i32;

fn lookup() -> BarrierInit {
    static F: OnceLock<usize> = OnceLock::new();
    let addr = *F.get_or_init(|| {
        for name in [c"MPI_Barrier_init", c"MPIX_Barrier_init"] {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            if !p.is_null() {
                return p as usize;
            }
        }
        panic!("neither MPI_Barrier_init nor MPIX_Barrier_init is in this MPI library");
    });
    // SAFETY: both symbols have this C signature.
    unsafe { std::mem::transmute::<usize, BarrierInit>(addr) }
}

/// `MPI_Barrier_init(comm, info, req)`; returns the MPI error code.
///
/// # Safety
/// As the MPI call: a live communicator and info, a valid out-pointer.
pub unsafe fn barrier_init(comm: mpi::ffi::MPI_Comm, info: mpi::ffi::MPI_Info, req: *mut mpi::ffi::MPI_Request) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { lookup()(comm, info, req) }
}
