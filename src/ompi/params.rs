//! hwbarr's MCA parameters (`coll_hwbarr_*`): registered with Open MPI's
//! variable system so that `ompi_info --param coll hwbarr --level 9` lists
//! them with their help strings and valid values, and settable as usual
//! (`--mca`, environment, parameter files). Choice parameters are MCA
//! enums built from `settings`' tables: Open MPI itself rejects a value
//! outside them, naming the valid ones, and hwbarr then steps aside.

use std::ffi::{c_int, c_void, CString};
use std::ptr::addr_of_mut;

use crate::ompi::ffi::{
    self, mca_base_component_t, mca_base_component_var_register, mca_base_var_info_lvl_t as Lvl,
    mca_base_var_scope_t as Scope, mca_base_var_type_t as Ty,
};
use crate::ompi::report;
use crate::settings::{Algorithm, Idle, InterAlgorithm, Setting};
use crate::topology::Topology;

/// Default priority: above coll/tuned (30) and 5.0's coll/han (35), so
/// installing hwbarr is enough for it to serve MPI_Barrier on the
/// communicators it accepts.
pub const DEFAULT_PRIORITY: c_int = 40;

/// A snapshot of the parameters, as Open MPI set them.
#[derive(Clone, Debug)]
pub struct Params {
    pub priority: c_int,
    pub algorithm: Algorithm,
    pub verbose: c_int,
    pub spin: c_int,
    /// None = auto.
    pub idle: Option<Idle>,
    /// None = auto.
    pub inter: Option<InterAlgorithm>,
    /// Where node-local ranks sit in the caches (parsed at registration).
    pub topology: Topology,
    /// Seconds a first exchange waits before the rank says whom it waits
    /// for; 0 or less: never.
    pub stall_notice: c_int,
    /// Candidate lines the line barrier tries over its first barriers.
    pub line_candidates: c_int,
    /// ns between two looks of MPI_Barrier's line path; 0 or less: a look
    /// after each PAUSE.
    pub line_poll_gap: c_int,
    /// Freed communicators' segments a process keeps (`shm::kept`).
    pub kept_segments: c_int,
}

// Storage Open MPI's variable system writes into (it needs stable
// addresses). Choice parameters hold their index in the setting's table.
static mut PRIORITY: c_int = DEFAULT_PRIORITY;
static mut VERBOSE: c_int = 0;
static mut SPIN: c_int = -1;
/// Default of `stall_notice`: long past any first barrier on a healthy
/// job's path, short of a batch job's time limit.
pub const DEFAULT_STALL_NOTICE: c_int = 60;
static mut STALL_NOTICE: c_int = DEFAULT_STALL_NOTICE;
/// Default of `line_candidates`: a quarter of the candidate lines the
/// segment holds. With the trial's blocks of 64 barriers, 4 candidates
/// left as few communicators on a slow line as 8 or 16 did, for a trial as
/// long as the one of 16 lines in blocks of 16 before (docs/benchmarks.md,
/// "The line trial polls as the line path does").
pub const DEFAULT_LINE_CANDIDATES: c_int = 4;
const _: () = assert!(DEFAULT_LINE_CANDIDATES as usize <= crate::shm::segment::LINE_SLOTS);
static mut LINE_CANDIDATES: c_int = DEFAULT_LINE_CANDIDATES;
/// Default of `line_poll_gap` (`pause::LINE_POLL_GAP_NS`).
pub const DEFAULT_LINE_POLL_GAP: c_int = crate::pause::LINE_POLL_GAP_NS as c_int;
static mut LINE_POLL_GAP: c_int = DEFAULT_LINE_POLL_GAP;
static mut KEPT_SEGMENTS: c_int = crate::shm::kept::DEFAULT as c_int;
static mut ALGORITHM: c_int = 0;
static mut IDLE: c_int = 0;
static mut INTER: c_int = 0;
/// The `topology` string as Open MPI stores it (it replaces the default's
/// pointer with its own copy).
static mut TOPOLOGY_TEXT: *const std::ffi::c_char = c"auto".as_ptr();
/// The `topology` string parsed, once registered.
static TOPOLOGY: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();

/// Reads the current parameter values.
pub fn current() -> Params {
    // SAFETY: Open MPI writes these only while registering or setting
    // variables, which it does before asking the component anything.
    let (priority, verbose, spin, stall_notice, line_candidates, line_poll_gap, kept_segments, alg, idle, inter) = unsafe {
        (
            *addr_of_mut!(PRIORITY),
            *addr_of_mut!(VERBOSE),
            *addr_of_mut!(SPIN),
            *addr_of_mut!(STALL_NOTICE),
            *addr_of_mut!(LINE_CANDIDATES),
            *addr_of_mut!(LINE_POLL_GAP),
            *addr_of_mut!(KEPT_SEGMENTS),
            *addr_of_mut!(ALGORITHM),
            *addr_of_mut!(IDLE),
            *addr_of_mut!(INTER),
        )
    };
    // Open MPI only stores values of the enum; anything else reads as auto.
    fn pick<T: Setting>(i: c_int) -> T {
        usize::try_from(i).ok().and_then(T::from_index).unwrap_or(T::CHOICES[0].value)
    }
    let topology = TOPOLOGY.get().copied().unwrap_or(Topology::Auto);
    Params {
        priority,
        algorithm: pick(alg),
        verbose,
        spin,
        idle: pick(idle),
        inter: pick(inter),
        topology,
        stall_notice,
        line_candidates,
        line_poll_gap,
        kept_segments,
    }
}

/// Registers a choice parameter as an MCA enum built from its table.
///
/// # Safety
/// `component` must be our component's version block and `storage` one of
/// our statics.
unsafe fn register_choice<T: Setting>(component: *const mca_base_component_t, lvl: Lvl, storage: *mut c_int) -> c_int {
    let names: Vec<*const std::ffi::c_char> = T::CHOICES.iter().map(|c| c.name.as_ptr()).collect();
    let (Ok(name), Ok(help)) = (CString::new(T::PARAM), CString::new(T::help())) else {
        return ffi::ERROR;
    };
    // SAFETY: the names are NUL-terminated statics (the table's), the
    // strings live across the call (Open MPI copies them), storage is a
    // static c_int as the shim's INT registration expects.
    unsafe {
        ffi::hwb_register_enum_param(
            component,
            name.as_ptr(),
            help.as_ptr(),
            lvl as c_int,
            names.as_ptr(),
            names.len() as c_int,
            storage,
        )
    }
}

/// Registers every parameter for `component`; called by Open MPI through
/// the component's `mca_register_component_params`. A negative result
/// means Open MPI refused a value (it has said which): the caller disables
/// hwbarr.
///
/// # Safety
/// `component` must point to hwbarr's component structure.
pub unsafe fn register(component: *const mca_base_component_t) -> c_int {
    let int = |name: &std::ffi::CStr, help: &std::ffi::CStr, lvl: Lvl, storage: *mut c_int| {
        // SAFETY: names and help are NUL-terminated statics; storage is one
        // of our int statics.
        unsafe {
            mca_base_component_var_register(
                component,
                name.as_ptr(),
                help.as_ptr(),
                Ty::MCA_BASE_VAR_TYPE_INT,
                std::ptr::null_mut(),
                0,
                0,
                lvl,
                Scope::MCA_BASE_VAR_SCOPE_READONLY,
                storage.cast::<c_void>(),
            )
        }
    };
    // SAFETY: `register_choice` gets our component block and our statics.
    let results = unsafe {
        [
            int(
                c"priority",
                c"Priority of the hwbarr coll component (default 40, above coll/tuned's 30 and coll/han's 35: \
                  installing hwbarr makes it serve MPI_Barrier on every communicator it accepts; 0 or less \
                  disables it)",
                Lvl::OPAL_INFO_LVL_6,
                addr_of_mut!(PRIORITY),
            ),
            register_choice::<Algorithm>(component, Lvl::OPAL_INFO_LVL_5, addr_of_mut!(ALGORITHM)),
            int(
                c"verbose",
                c"Verbosity of hwbarr: 0 warnings only, 1 one line per communicator saying which algorithm \
                  serves it (from its rank 0), 2 also one line per rank and communicator at release with the \
                  number of barriers hwbarr served and, at MPI_Finalize, how often progress passes gave the core up \
                  while barriers waited, 3 also the communicators hwbarr declines and why, and once per rank where it \
                  sits in the node's caches (topology auto)",
                Lvl::OPAL_INFO_LVL_5,
                addr_of_mut!(VERBOSE),
            ),
            int(
                c"spin",
                c"Polls of the barrier's shared word between two turns of Open MPI's progress engine while a \
                  rank waits (-1: automatic, 256 when every rank on the node has a core, 1 when cores are shared: \
                  ranks on the node, the job's or the communicator's own, outnumber them, or mpi_yield_when_idle \
                  is set; 0: never turn progress while waiting - for \
                  testing only: a peer's pending rendezvous then deadlocks). A rank that yields or sleeps \
                  while it waits turns none in the first 3 rounds of a wait on the node's shared memory, \
                  whose own protocol needs no progress",
                Lvl::OPAL_INFO_LVL_9,
                addr_of_mut!(SPIN),
            ),
            register_choice::<Option<Idle>>(component, Lvl::OPAL_INFO_LVL_9, addr_of_mut!(IDLE)),
            int(
                c"stall_notice",
                c"Seconds a communicator's first barrier waits for hwbarr's setup exchange before the waiting \
                  rank says which ranks it waits for (once per process, on the communicator's ranks 0 to 3); it \
                  goes on waiting (a rank that does not run \
                  hwbarr's barrier, because coll settings differ between ranks, makes that wait endless). \
                  0 or less: never say it. Default: 60",
                Lvl::OPAL_INFO_LVL_6,
                addr_of_mut!(STALL_NOTICE),
            ),
            int(
                c"line_candidates",
                c"Cache lines the line barrier tries over a communicator's first barriers, keeping the \
                  fastest for the barriers after them (a line passed between cores costs more or less by its \
                  address: on mesh CPUs each line has its home in one L3 slice). Rank 0's value counts. The \
                  trial is the program's own barriers of any kind after the communicator's first: 3 blocks \
                  of 64 per line that rank 0 times, 2 + 192 per line in all (770 for 4 lines), no barrier of \
                  its own; only where the node's ranks keep their cores (the spin policy, with no more ranks \
                  than cores). 1 or less: no trial, the first line; at most 16. Default: 4",
                Lvl::OPAL_INFO_LVL_9,
                addr_of_mut!(LINE_CANDIDATES),
            ),
            int(
                c"line_poll_gap",
                c"Nanoseconds between two looks of a waiting rank in MPI_Barrier on the line barrier, where the \
                  node's ranks keep their cores, made of PAUSE instructions timed once a process (at least one, \
                  at most 64). At 2 ranks a barrier runs at its fastest when one cache-line transfer carries two \
                  barriers: the rank that completed one is back with its next arrival before its peer looks, \
                  and a peer that looks after every PAUSE takes the line too early. Each rank's own value \
                  counts. 0 or less: a look after each PAUSE. Default: 32",
                Lvl::OPAL_INFO_LVL_9,
                addr_of_mut!(LINE_POLL_GAP),
            ),
            int(
                c"kept_segments",
                c"Shared-memory segments of freed communicators a process keeps mapped for its next \
                  communicators of the same size (the creating rank also keeps their fds open, at most 16 a \
                  process, live communicators' included), so that setting a device up makes no system calls \
                  and page faults: a segment serves again only once every rank that mapped it freed its \
                  communicator, zeroed; a failed or revoked communicator's is never kept. Everything kept \
                  goes when the process exits. 0 or less: none, each segment unmapped and its fd closed \
                  with its communicator; at most 64. Default: 4",
                Lvl::OPAL_INFO_LVL_9,
                addr_of_mut!(KEPT_SEGMENTS),
            ),
            register_choice::<Option<InterAlgorithm>>(component, Lvl::OPAL_INFO_LVL_5, addr_of_mut!(INTER)),
            mca_base_component_var_register(
                component,
                c"topology".as_ptr(),
                c"Where a node's ranks sit in its caches, which the toggle and polled barriers' trees follow \
                  (toggle: one bank per L3 domain, one per package above them; polled: each L3 domain read by \
                  its lowest rank, the domains' leaders by rank 0; an L3 that spans NUMA nodes is one domain \
                  per node): 'auto' (from the binding Open MPI reports for each rank, in its hwloc topology, \
                  the machine's own or one given to it as an XML file (hwloc_base_topo_file on 4.1, \
                  PRRTE's hwloc_use_topo_file on 5.0 and later), when that lies within one L3 domain and \
                  NUMA node and the rank runs where it says; else (bound wider, not bound, or rebound after \
                  launch) from the rank's CPU binding and the machine's caches and NUMA nodes in sysfs; \
                  a rank bound wider than one domain by the CPU it runs on, or \
                  on an oversubscribed node not placed, as with 'flat'), 'flat' (toggle banks of 64 ranks, \
                  polled groups of 16, in rank order), or a synthetic machine in hwloc's synthetic \
                  syntax such as 'package:2 l3:12 core:8' or 'package:2 numa:4 core:14' with node-local \
                  rank i on core i (for tests and models). Default: auto"
                    .as_ptr(),
                Ty::MCA_BASE_VAR_TYPE_STRING,
                std::ptr::null_mut(),
                0,
                0,
                Lvl::OPAL_INFO_LVL_9,
                Scope::MCA_BASE_VAR_SCOPE_READONLY,
                addr_of_mut!(TOPOLOGY_TEXT).cast::<c_void>(),
            ),
        ]
    };
    if let Some(rc) = results.into_iter().find(|&r| r < 0) {
        return rc;
    }
    // SAFETY: Open MPI has set the string (or left the default), and
    // writes it only while registering or setting variables.
    let text = unsafe { *addr_of_mut!(TOPOLOGY_TEXT) };
    let text = if text.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated string Open MPI (or our default) owns.
        unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy().into_owned()
    };
    match Topology::parse(&text) {
        Ok(t) => {
            let _ = TOPOLOGY.set(t);
            ffi::SUCCESS
        }
        Err(why) => {
            // As Open MPI says it for a choice parameter: one line naming
            // the valid values; the component then steps aside.
            report::verbose(0, &why);
            ffi::ERROR
        }
    }
}
