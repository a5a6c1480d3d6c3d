//! coll/basic's linear barrier, the reference: every rank sends a zero-byte
//! message to rank 0, rank 0 receives n-1 of them, then sends n-1 releases.
//! Runs on Open MPI's point-to-point engine (PML).

use std::ffi::c_int;

use crate::ffi::{
    hwb_pml_recv, hwb_pml_send, ompi_communicator_t, MCA_COLL_BASE_TAG_BARRIER, MPI_ANY_SOURCE,
};

const TAG: c_int = MCA_COLL_BASE_TAG_BARRIER;

/// A communicator's point-to-point view: just enough to exchange bytes.
#[derive(Clone, Copy)]
pub struct Pml {
    pub comm: *mut ompi_communicator_t,
}

impl Pml {
    pub fn send(&self, buf: &[u8], dst: c_int) -> c_int {
        // SAFETY: `comm` is the live communicator the module serves; the
        // buffer is valid for its length for the whole (blocking) call.
        unsafe { hwb_pml_send(buf.as_ptr().cast(), buf.len(), dst, TAG, self.comm) }
    }

    pub fn recv(&self, buf: &mut [u8], src: c_int) -> c_int {
        // SAFETY: as in `send`; the buffer is writable for its length.
        unsafe { hwb_pml_recv(buf.as_mut_ptr().cast(), buf.len(), src, TAG, self.comm) }
    }
}

/// Turns an Open MPI return code into a Result.
pub fn check(rc: c_int) -> Result<(), c_int> {
    if rc == crate::ffi::SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// The linear barrier on `pml` as `rank` of `size`.
pub fn barrier(pml: Pml, rank: c_int, size: c_int) -> Result<(), c_int> {
    if rank > 0 {
        check(pml.send(&[], 0))?;
        return check(pml.recv(&mut [], 0));
    }
    for _ in 1..size {
        check(pml.recv(&mut [], MPI_ANY_SOURCE))?;
    }
    for q in 1..size {
        check(pml.send(&[], q))?;
    }
    Ok(())
}
