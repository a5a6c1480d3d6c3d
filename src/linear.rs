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
        if let Some(rc) = fault::injected() {
            return rc;
        }
        // SAFETY: `comm` is the live communicator the module serves; the
        // buffer is valid for its length for the whole (blocking) call.
        unsafe { hwb_pml_send(buf.as_ptr().cast(), buf.len(), dst, TAG, self.comm) }
    }

    pub fn recv(&self, buf: &mut [u8], src: c_int) -> c_int {
        if let Some(rc) = fault::injected() {
            return rc;
        }
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
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
        let mut r = null_mut();
        // SAFETY: the caller keeps `buf` alive until every request completed
        // (`done` or `wait`); zero-length buffers are never touched.
        let rc = unsafe {
            ffi::hwb_pml_isend(buf.as_ptr().cast(), buf.len() * 8, dst, MCA_COLL_BASE_TAG_BARRIER, self.comm, &mut r)
        };
        self.push(rc, r)
    }

    pub fn irecv(&mut self, buf: &mut [u64], src: c_int) -> Result<(), c_int> {
        if let Some(rc) = fault::injected() {
            return Err(rc);
        }
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

/// Test builds only (cargo feature `fault-injection`, which `make test`
/// uses for its fault tests; `make`/`make install` never enable it):
/// `HWBARR_FAULT_P2P=<n>` makes the n-th point-to-point operation hwbarr
/// posts in this process fail (`OMPI_ERROR`, nothing posted);
/// `HWBARR_FAULT_P2P=<rank>:<n>,...` does so on the listed world ranks
/// only, each at its own n. Every send and receive hwbarr posts goes
/// through `Pml` or `Flight`, so this reaches the device bootstrap, the
/// layout exchange, the leaders' messages and the linear barrier.
#[cfg(feature = "fault-injection")]
mod fault {
    use std::ffi::c_int;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::OnceLock;

    fn target() -> Option<u64> {
        static N: OnceLock<Option<u64>> = OnceLock::new();
        *N.get_or_init(|| {
            let spec = std::env::var("HWBARR_FAULT_P2P").ok()?;
            let rank = std::env::var("OMPI_COMM_WORLD_RANK").unwrap_or_default();
            spec.split(',').find_map(|item| match item.split_once(':') {
                None => item.trim().parse().ok(),
                Some((r, n)) if r.trim() == rank => n.trim().parse().ok(),
                Some(_) => None,
            })
        })
    }

    /// Counts one operation; `Some(error)` if it is the one to fail.
    pub fn injected() -> Option<c_int> {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let n = target()?;
        if COUNT.fetch_add(1, Relaxed) + 1 != n {
            return None;
        }
        // Level 0: always shown (test builds only).
        crate::report::verbose(0, &format!("fault injection: point-to-point operation {n} of this rank fails"));
        Some(crate::ffi::ERROR)
    }
}

#[cfg(not(feature = "fault-injection"))]
mod fault {
    /// Default builds: no fault injection.
    #[inline(always)]
    pub fn injected() -> Option<std::ffi::c_int> {
        None
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
