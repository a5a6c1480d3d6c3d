//! The hwbarr module object Open MPI keeps per communicator: built around
//! a `Server` (the communicator's state and barrier queue), with the entry
//! points Open MPI calls on it.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::ompi::ffi::{self, ompi_communicator_t as Comm, ompi_info_t as Info, ompi_request_t as Request, Module};
use crate::ompi::progress;
use crate::ompi::report::{self, guard};
use crate::ompi::request;
use crate::ompi::server::Server;

type BarrierFn = unsafe extern "C" fn(*mut Comm, *mut Module) -> c_int;

/// # Safety
/// `module` must be an hwbarr module made by `new_module`.
pub(crate) unsafe fn state<'a>(module: *mut Module) -> &'a Server {
    // SAFETY: set by `new_module` to a leaked Box, freed only by the
    // module's destructor, which runs after the last call into it. Shared
    // parts are atomics or behind locks.
    unsafe { &*ffi::hwb_module_state(module).cast::<Server>() }
}

/// # Safety
/// As `state`, and no other reference to the state may be alive: only
/// while Open MPI sets the module up.
unsafe fn state_mut<'a>(module: *mut Module) -> &'a mut Server {
    // SAFETY: see above; enable/disable run before and after any barrier.
    unsafe { &mut *ffi::hwb_module_state(module).cast::<Server>() }
}

/// Builds an Open MPI module object around `st`, which it owns from here
/// on (its destructor drops it).
pub fn new_module(mut st: Server) -> *mut Module {
    // SAFETY: hwb_module_new returns a fresh module object or NULL; we fill
    // in our entry points and hand it our state, which its destructor drops.
    unsafe {
        let m = ffi::hwb_module_new();
        if m.is_null() {
            return m;
        }
        (*m).coll_module_enable = Some(enable);
        (*m).coll_module_disable = Some(disable);
        (*m).coll_barrier = Some(barrier);
        // Every algorithm: the first barrier of any kind is the first
        // exchange, in which the ranks agree on one algorithm.
        (*m).coll_ibarrier = Some(ibarrier);
        (*m).coll_barrier_init = Some(barrier_init);
        st.module = m;
        ffi::hwb_module_set_state(m, Box::into_raw(Box::new(st)).cast());
        m
    }
}

unsafe extern "C" fn enable(module: *mut Module, comm: *mut Comm) -> c_int {
    guard("module enable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and its live communicator,
        // before any collective runs on it.
        let st = unsafe { state_mut(module) };
        // SAFETY: the live communicator this module is enabled on.
        unsafe { st.set_comm(comm) };
        // Last, once nothing can fail: on 6.0 a module puts its functions
        // into the communicator itself (a no-op where the base does it).
        // SAFETY: our module, made by `new_module`, and its communicator.
        unsafe { ffi::hwb_module_install(module, comm) };
        ffi::SUCCESS
    })
}

/// On 6.0, hands the barrier slots that are still ours back to what held
/// them before. Nothing else to undo: hwbarr keeps no reference on other
/// modules (without a device it runs its own linear barrier, not the
/// component below's), and its state goes with the module object.
unsafe extern "C" fn disable(module: *mut Module, comm: *mut Comm) -> c_int {
    guard("module disable", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module and the communicator it was
        // enabled on, still alive while its collectives are torn down.
        unsafe { ffi::hwb_module_uninstall(module, comm) };
        ffi::SUCCESS
    })
}

unsafe extern "C" fn barrier(_comm: *mut Comm, module: *mut Module) -> c_int {
    // SAFETY: Open MPI calls this with the module it selected: ours.
    let st = unsafe { state(module) };
    // The line core's barrier first, outside any containment: it cannot
    // panic, and at 2 ranks each instruction between a release and the
    // next arrival counts (`Server::line_barrier`). Every other barrier
    // runs under one containment, not `guard` around it: with a second
    // one nested hwbarr's barrier read about 1.18x the floor at 8 ranks on
    // 2 cores, with one about 1.13x (docs/benchmarks.md, "MPI_Barrier's
    // entry: one panic containment, not two"). A panic on the device's
    // direct path (outside `Comm::contained`) fails the communicator, so
    // that the other ranks are told.
    if let Some(rc) = st.line_barrier() {
        return rc;
    }
    if let Some(rc) = st.crowd_line_barrier() {
        return rc;
    }
    report::contain(|| "MPI_Barrier".into(), || st.barrier()).unwrap_or_else(|| st.barrier_panicked())
}

/// MPI_Ibarrier.
unsafe extern "C" fn ibarrier(comm: *mut Comm, request: *mut *mut Request, module: *mut Module) -> c_int {
    guard("MPI_Ibarrier", ffi::ERROR, || {
        // SAFETY: Open MPI passes our module, the live communicator it
        // serves and a valid out-pointer.
        unsafe { request::ibarrier(state(module), comm, &mut *request) }
    })
}

/// MPIX_Barrier_init (4.1) / MPI_Barrier_init (5.0).
unsafe extern "C" fn barrier_init(
    comm: *mut Comm,
    _info: *mut Info,
    request: *mut *mut Request,
    module: *mut Module,
) -> c_int {
    guard(ffi::abi::BARRIER_INIT_NAME, ffi::ERROR, || {
        // SAFETY: Open MPI passes our module, the live communicator it
        // serves and a valid out-pointer.
        unsafe { request::barrier_init(state(module), comm, &mut *request) }
    })
}

/// The barriers hwbarr served on `comm` (0 when another component serves
/// its barrier), for the MPI_T performance variable.
///
/// # Safety
/// `comm` must be a live communicator.
pub(crate) unsafe fn served_on(comm: *mut Comm) -> u64 {
    let (mut f, mut m) = (None, null_mut());
    // SAFETY: reads the barrier entry of a live communicator.
    unsafe { ffi::hwb_comm_current_barrier(comm, &mut f, &mut m) };
    match f {
        Some(f) if std::ptr::fn_addr_eq(f, barrier as BarrierFn) && !m.is_null() => {
            // SAFETY: the communicator's barrier is ours, so its module is
            // an hwbarr module made by `new_module`.
            unsafe { state(m) }.comm.served()
        }
        _ => 0,
    }
}

/// Called by the module's C destructor: frees the Rust state.
///
/// # Safety
/// `state` is NULL or the pointer `new_module` gave the module, handed
/// over exactly once, with no other reference to the state alive.
#[no_mangle]
pub unsafe extern "C" fn hwbarr_module_state_drop(state: *mut c_void) {
    guard("module release", (), || {
        if !state.is_null() {
            // First out of progress's list, while the state is still only
            // shared: a pass may be using it until then.
            progress::forget(state.cast::<Server>().cast_const());
            // SAFETY: see above: it came from Box::into_raw in `new_module`,
            // and no progress pass can reach it any more.
            drop(unsafe { Box::from_raw(state.cast::<Server>()) });
        }
    })
}

/// Called by the module's revoke hook (Open MPI 5.0 and later, built with
/// fault tolerance, run with it on: `mpirun --with-ft ulfm`) when Open MPI
/// revokes the communicator's collectives: one of its processes failed
/// (`code` MPI_ERR_PROC_FAILED) or MPIX_Comm_revoke revoked it
/// (MPI_ERR_REVOKED). Its barriers in flight end with `code` instead of
/// waiting for a rank that may never come. Called from progress, from
/// MPIX_Comm_revoke, or from Open MPI's failure detector thread: it only
/// touches atomics.
///
/// # Safety
/// `state` is the state `new_module` gave a live module.
#[no_mangle]
pub unsafe extern "C" fn hwbarr_module_revoked(state: *mut c_void, code: c_int) {
    guard("revoke", (), || {
        if state.is_null() {
            return;
        }
        // SAFETY: see above; shared access only, as in any barrier call.
        let st = unsafe { &*state.cast::<Server>() };
        report::verbose(2, &st.comm.describe(&format!("collectives revoked by Open MPI (MPI error {code})")));
        st.comm.revoked(code);
    })
}
