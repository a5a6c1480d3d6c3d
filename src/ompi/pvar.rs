//! MPI_T performance variable `coll_hwbarr_barriers`: the barriers hwbarr
//! itself served on a communicator (blocking, non-blocking and persistent,
//! its linear barrier included when there is no device). Bound to the communicator,
//! so profilers (TAU, Score-P) and the tests read it through
//! `MPI_T_pvar_*` instead of parsing stderr.

use std::ffi::{c_int, c_void};

use crate::ompi::ffi::{self, ompi_communicator_t as Comm};
use crate::ompi::module;
use crate::ompi::report::guard;

/// Registers the variable with Open MPI's MPI_T (at component registration).
///
/// # Safety
/// `component` must be our component's version block.
pub unsafe fn register(component: *const ffi::mca_base_component_t) -> c_int {
    // SAFETY: static NUL-terminated strings, our component, and two
    // callbacks with the C signatures the shim declares.
    let rc = unsafe {
        ffi::hwb_pvar_register_comm_counter(
            component,
            c"barriers".as_ptr(),
            c"Barriers (MPI_Barrier, MPI_Ibarrier, persistent) that hwbarr served on this communicator \
              with its own algorithm (an MPI_T counter: a handle counts from its allocation); 0 where another component \
              serves the barrier"
                .as_ptr(),
            Some(get_value),
            Some(notify),
        )
    };
    if rc < 0 { rc } else { ffi::SUCCESS }
}

/// One value per communicator.
unsafe extern "C" fn notify(_pvar: *mut c_void, event: c_int, _comm: *mut c_void, count: *mut c_int) -> c_int {
    guard("MPI_T pvar notify", ffi::ERROR, || {
        // SAFETY: a plain comparison of the event code.
        let bind = unsafe { ffi::hwb_pvar_event_is_bind(event) } != 0;
        if bind && !count.is_null() {
            // SAFETY: Open MPI passes a valid out-pointer with the bind event.
            unsafe { *count = 1 };
        }
        ffi::SUCCESS
    })
}

/// Reads the count of the hwbarr module serving `comm`'s barrier, if any.
unsafe extern "C" fn get_value(_pvar: *const c_void, value: *mut c_void, comm: *mut c_void) -> c_int {
    guard("MPI_T pvar read", ffi::ERROR, || {
        if value.is_null() || comm.is_null() {
            return ffi::ERROR;
        }
        // SAFETY: Open MPI passes the communicator the handle was bound to
        // (alive while the handle is in use, as MPI requires).
        let n = unsafe { module::served_on(comm.cast::<Comm>()) };
        // SAFETY: the value buffer holds one unsigned long long (the type
        // registered above).
        unsafe { *value.cast::<u64>() = n };
        ffi::SUCCESS
    })
}
