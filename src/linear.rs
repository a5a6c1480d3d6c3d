//! coll/basic's linear barrier, the reference: every rank sends a zero-byte
//! message to rank 0, rank 0 receives n-1 of them, then sends n-1 releases.
//! Runs on Open MPI's point-to-point engine (PML).

use std::ffi::c_int;

use std::ptr::null_mut;

use crate::ffi::{
    self, hwb_pml_recv, hwb_pml_send, ompi_communicator_t, ompi_communicator_t as Comm, ompi_request_t as Request,
    MCA_COLL_BASE_TAG_BARRIER, MPI_ANY_SOURCE,
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

/// Point-to-point requests in flight, over buffers this struct owns.
pub struct Flight {
    comm: *mut Comm,
    reqs: Vec<*mut Request>,
}

impl Flight {
    pub fn new(comm: *mut Comm) -> Flight {
        Flight { comm, reqs: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn isend(&mut self, buf: &[u64], dst: c_int) -> Result<(), c_int> {
        let mut r = null_mut();
        // SAFETY: the caller keeps `buf` alive until every request completed
        // (`done` or `wait`); zero-length buffers are never touched.
        let rc = unsafe {
            ffi::hwb_pml_isend(buf.as_ptr().cast(), buf.len() * 8, dst, MCA_COLL_BASE_TAG_BARRIER, self.comm, &mut r)
        };
        self.push(rc, r)
    }

    pub fn irecv(&mut self, buf: &mut [u64], src: c_int) -> Result<(), c_int> {
        let mut r = null_mut();
        // SAFETY: as in `isend`; the buffer is writable and outlives the request.
        let rc = unsafe {
            ffi::hwb_pml_irecv(buf.as_mut_ptr().cast(), buf.len() * 8, src, MCA_COLL_BASE_TAG_BARRIER, self.comm, &mut r)
        };
        self.push(rc, r)
    }

    fn push(&mut self, rc: c_int, r: *mut Request) -> Result<(), c_int> {
        if rc != ffi::SUCCESS {
            return Err(rc);
        }
        self.reqs.push(r);
        Ok(())
    }

    /// True when every request completed (each is freed as it does).
    pub fn done(&mut self) -> Result<bool, c_int> {
        let mut err = ffi::SUCCESS;
        let mut first_err = ffi::SUCCESS;
        self.reqs.retain_mut(|r| {
            // SAFETY: a live request returned by the PML; freed and nulled once done.
            let done = unsafe { ffi::hwb_request_done(r, &mut err) } != 0;
            if done && err != ffi::SUCCESS && first_err == ffi::SUCCESS {
                first_err = err;
            }
            !done
        });
        if first_err != ffi::SUCCESS {
            return Err(first_err);
        }
        Ok(self.reqs.is_empty())
    }
}

impl Flight {
    /// Turns progress until every request completed.
    pub fn wait(&mut self) -> Result<(), c_int> {
        while !self.done()? {
            crate::ffi::progress();
        }
        Ok(())
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

/// The linear barrier among `members` (ranks of `pml`'s communicator) as
/// `members[me]`; `members[0]` gathers and releases. Serves a node's local
/// phase when its shared-memory device is unusable.
pub fn barrier_among(pml: Pml, members: &[c_int], me: usize) -> Result<(), c_int> {
    if me > 0 {
        check(pml.send(&[], members[0]))?;
        return check(pml.recv(&mut [], members[0]));
    }
    for &q in &members[1..] {
        check(pml.recv(&mut [], q))?;
    }
    for &q in &members[1..] {
        check(pml.send(&[], q))?;
    }
    Ok(())
}
