//! hwbarr's requests: MPI_Ibarrier and the persistent barrier as Open MPI
//! request objects, queued on their communicator's `engine::Queue` and
//! completed from progress (`ompi::progress`), and their lifetime: each
//! request holds its module and communicator until it is freed.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::ompi::ffi::{self, ompi_communicator_t as OmpiComm, ompi_request_t as Request, Module};
use crate::ompi::report::guard;
use crate::ompi::probe::{self, Point};
use crate::ompi::server::Server;
use crate::p2p::P2p;

/// Spare requests a module keeps.
const SPARES: usize = 4;

/// The module state an hwbarr request belongs to.
///
/// # Safety
/// `r` is a request made by `new_request` and not released: its hold
/// keeps the state alive for as long as the reference is used.
unsafe fn owner<'a>(r: *mut Request) -> &'a Server {
    // SAFETY: see above; `new_request` stored the state as the owner.
    unsafe { &*ffi::hwb_request_owner(r).cast::<Server>() }
}

/// Releases a request nobody references any more, with no lock of ours
/// held: dropping its hold may destroy the module and its state.
///
/// # Safety
/// `r` is a request of ours that no queue and no MPI handle refers to.
unsafe fn release(mut r: *mut Request) {
    // SAFETY: see above; the request holds one reference on its module
    // and one on its communicator, dropped here after the request (the
    // state may be gone after either, so its fields are read first).
    unsafe {
        let (module, comm) = {
            let st = owner(r);
            (st.module, st.ompi_comm)
        };
        ffi::hwb_request_release(&mut r);
        unhold(module, comm);
    }
}

/// A request's hold on what it uses: the module (whose state it points
/// to) and the communicator. MPI_Comm_free only marks a communicator for
/// deallocation; Open MPI destroys it, and with it the module, when its
/// last reference goes. Holding one per request keeps both alive until the
/// request is freed, whatever the order of MPI_Comm_free, MPI_Wait and
/// MPI_Request_free (MPI 4.1, 7.4.3: pending operations complete normally).
///
/// # Safety
/// `st` is a module state whose `module` and `ompi_comm` are live.
unsafe fn hold(st: &Server) {
    // SAFETY: both are live Open MPI objects (see above).
    unsafe {
        ffi::hwb_obj_retain(st.module.cast());
        ffi::hwb_obj_retain(st.ompi_comm.cast());
    }
}

/// Drops a hold taken by `hold`, with no lock of ours held: the last
/// reference on the communicator destroys it, its module and the state.
///
/// # Safety
/// A hold on `module` and `comm` is owned by the caller and not used again.
unsafe fn unhold(module: *mut Module, comm: *mut OmpiComm) {
    // SAFETY: see above; the module goes first, the communicator holds
    // the module's last reference until it is destroyed itself.
    unsafe {
        ffi::hwb_obj_release(module.cast());
        ffi::hwb_obj_release(comm.cast());
    }
}

/// Issues the barrier of `req` (a persistent request just started), or of a
/// new MPI_Ibarrier request if null: in the express lane when it may take
/// it (`Server::start_express`), else queued, and entered if at the head;
/// progress looks after it either way. Returns the request (null if none
/// could be made). `tag`: the non-blocking collective tag the call took
/// (`nbc_tag`), for an MPI_Ibarrier; a started persistent barrier has the
/// one of its init.
///
/// # Safety
/// `comm` is `st`'s live communicator; a non-null `req` is one of `st`'s
/// persistent requests, just activated.
unsafe fn issue(st: &Server, comm: *mut OmpiComm, req: *mut Request, tag: Option<c_int>) -> *mut Request {
    let persistent = !req.is_null();
    let req = if persistent {
        req
    } else {
        let spare = st.lock().requests.spare.pop();
        match spare {
            // SAFETY: a retired request of ours; it takes its hold again.
            Some(r) => unsafe {
                ffi::hwb_request_reissue(r);
                hold(st);
                r
            },
            // SAFETY: `comm` is `st`'s live communicator (see above).
            None => unsafe { new_request(st, comm, false) },
        }
    };
    if req.is_null() || st.start_express(req) {
        return req;
    }
    {
        let mut inner = st.lock();
        let tag = if persistent {
            inner.requests.persistent_tags.iter().find(|(r, _)| *r == req).map(|&(_, t)| t)
        } else {
            tag
        };
        inner.queue.push(Some(req), tag);
        st.advance(&mut inner);
    }
    // After the lock: `watch` may take the progress list's.
    if st.in_flight() {
        st.watch();
    }
    req
}

/// A new request of `st`'s, holding its module and communicator.
///
/// # Safety
/// `comm` is `st`'s live communicator and `st.module` its module object.
unsafe fn new_request(st: &Server, comm: *mut OmpiComm, persistent: bool) -> *mut Request {
    // SAFETY: creates an Open MPI request owned by the caller; it holds
    // our module and its communicator so that both outlive it.
    unsafe {
        let r = ffi::hwb_request_new(
            comm,
            persistent as c_int,
            (st as *const Server).cast_mut().cast::<c_void>(),
            Some(start),
            Some(free),
            Some(cancel),
        );
        if !r.is_null() {
            hold(st);
        }
        r
    }
}

/// Takes the communicator's next non-blocking collective tag, as libnbc
/// does for each MPI_Ibarrier and each persistent barrier init: ranks
/// whose barrier is libnbc's (hwbarr not selected there) stay in step with
/// ours, which lets a first exchange see their messages (`lookout`). Taken
/// at the call, in call order: every rank takes the same tags.
fn nbc_tag(st: &Server) -> c_int {
    st.comm.p2p().reserve_nbc_tag()
}

/// MPI_Ibarrier on `st`'s communicator: the request in `out`.
///
/// # Safety
/// `comm` is `st`'s live communicator.
pub unsafe fn ibarrier(st: &Server, comm: *mut OmpiComm, out: &mut *mut Request) -> c_int {
    let tag = nbc_tag(st);
    // SAFETY: see above.
    let r = unsafe { issue(st, comm, null_mut(), Some(tag)) };
    if r.is_null() {
        return ffi::ERROR;
    }
    *out = r;
    ffi::SUCCESS
}

/// MPIX_Barrier_init (4.1) / MPI_Barrier_init (5.0, 6.0): a persistent
/// barrier request, inactive until started, in `out`.
///
/// # Safety
/// `comm` is `st`'s live communicator.
pub unsafe fn barrier_init(st: &Server, comm: *mut OmpiComm, out: &mut *mut Request) -> c_int {
    // SAFETY: see above.
    let r = unsafe { new_request(st, comm, true) };
    if r.is_null() {
        return ffi::ERROR;
    }
    let tag = nbc_tag(st);
    st.lock().requests.persistent_tags.push((r, tag));
    *out = r;
    ffi::SUCCESS
}

/// MPI_Start / MPI_Startall on our persistent requests.
unsafe extern "C" fn start(count: usize, reqs: *mut *mut Request) -> c_int {
    probe::stamp(Point::Started);
    if count == 1 {
        // SAFETY: Open MPI passes one of our persistent requests, inactive
        // (MPI_Start on an active request is erroneous).
        unsafe {
            let r = *reqs;
            // The line core's start: nothing that can panic before its
            // arrival, and what follows it contained.
            if let Some(rc) = owner(r).line_start(r) {
                return rc;
            }
        }
    }
    guard("MPI_Start", ffi::ERROR, || {
        for i in 0..count {
            // SAFETY: Open MPI passes `count` of our persistent requests.
            unsafe {
                let r = *reqs.add(i);
                let st = owner(r);
                ffi::hwb_request_activate(r);
                issue(st, st.ompi_comm, r, None);
            }
        }
        ffi::SUCCESS
    })
}

/// req_free: called by MPI_Wait/Test on a completed request, or by
/// MPI_Request_free. Freeing the request of a barrier still in flight is
/// erroneous (MPI 4.1, 6.12: nonblocking and persistent collectives) and
/// refused with MPI_ERR_REQUEST, as libnbc refuses it: the request stays
/// valid, the barrier goes on.
unsafe extern "C" fn free(request: *mut *mut Request) -> c_int {
    guard("request free", ffi::ERROR, || {
        // SAFETY: Open MPI passes a pointer to one of our requests.
        let r = unsafe { *request };
        // SAFETY: one of our requests, not yet released.
        let st = unsafe { owner(r) };
        enum Fate {
            Kept,
            Release,
        }
        let fate = {
            let mut inner = st.lock();
            // In flight: queued, or claimed from the express lane by a
            // progress pass that has not completed it yet.
            // SAFETY: reads a flag of our live request.
            if inner.queue.holds(r) || unsafe { ffi::hwb_request_is_complete(r) } == 0 {
                return ffi::MPI_ERR_REQUEST as c_int;
            }
            let pool = &mut inner.requests;
            pool.persistent_tags.retain(|&(q, _)| q != r);
            // SAFETY: reads a flag of our live request.
            if pool.spare.len() < SPARES && unsafe { ffi::hwb_request_is_persistent(r) } == 0 {
                // SAFETY: completed, and MPI forgets it now: ours to keep.
                unsafe { ffi::hwb_request_retire(r) };
                pool.spare.push(r);
                Fate::Kept
            } else {
                Fate::Release
            }
        };
        match fate {
            // SAFETY: drop the hold the request had (after unlocking: it
            // may be the last reference); `st` is not used after this.
            Fate::Kept => unsafe { unhold(st.module, st.ompi_comm) },
            // SAFETY: MPI is done with it and no queue holds it.
            Fate::Release => unsafe { release(r) },
        }
        // SAFETY: the caller's handle.
        unsafe { ffi::hwb_request_forget(request) };
        ffi::SUCCESS
    })
}

/// Collective operations cannot be cancelled (MPI 4.1, 6.12): refused
/// with MPI_ERR_REQUEST, as libnbc refuses it.
unsafe extern "C" fn cancel(_req: *mut Request, _complete: c_int) -> c_int {
    ffi::MPI_ERR_REQUEST as c_int
}
