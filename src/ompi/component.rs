//! The component Open MPI finds in `mca_coll_hwbarr.so`: the exported data
//! symbol `mca_coll_hwbarr_component` and its entry points.

use std::ffi::{c_char, c_int};
use std::ptr::{addr_of, null_mut};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::ompi::ffi::{self, ompi_communicator_t as Comm, Module};
use crate::comm::{self, Options};
use crate::ompi::progress;
use crate::ompi::server::Server;
use crate::ompi::report::{self, guard, Topic};
use crate::ompi::{module, node, params, probe};
use crate::p2p::pml::Pml;
use crate::topology::Topology;

/// A C `char[N]` holding `s`, NUL-padded, built at compile time.
const fn cname<const N: usize>(s: &str) -> [c_char; N] {
    let b = s.as_bytes();
    assert!(b.len() < N);
    let mut out = [0 as c_char; N];
    let mut i = 0;
    while i < b.len() {
        out[i] = b[i] as c_char;
        i += 1;
    }
    out
}

const fn int(v: u32) -> c_int {
    v as c_int
}

/// The component structure Open MPI's loader looks up by name. Its coll
/// interface version (2.0.0 on 4.1, 2.4.0 on 5.0) comes from the headers
/// we were built against (`ffi::abi`). `static mut`: Open MPI takes it by
/// non-const pointer.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static mut mca_coll_hwbarr_component: ffi::Component = component();

const fn component() -> ffi::Component {
    // SAFETY: a plain C struct of integers, char arrays and nullable
    // function pointers, for which all-zero is valid (and what C's static
    // initialisers give the fields we do not name, `reserved` included).
    let mut c: ffi::Component = unsafe { std::mem::zeroed() };
    let v = &mut c.collm_version;
    v.mca_major_version = int(ffi::MCA_BASE_VERSION_MAJOR);
    v.mca_minor_version = int(ffi::MCA_BASE_VERSION_MINOR);
    v.mca_release_version = int(ffi::MCA_BASE_VERSION_RELEASE);
    v.mca_project_name = cname("ompi");
    v.mca_project_major_version = int(ffi::OMPI_MAJOR_VERSION);
    v.mca_project_minor_version = int(ffi::OMPI_MINOR_VERSION);
    v.mca_project_release_version = int(ffi::OMPI_RELEASE_VERSION);
    v.mca_type_name = cname("coll");
    (v.mca_type_major_version, v.mca_type_minor_version, v.mca_type_release_version) = ffi::abi::COLL_API_VERSION;
    v.mca_component_name = cname("hwbarr");
    v.mca_component_major_version = 0;
    v.mca_component_minor_version = 2;
    v.mca_component_release_version = 0;
    v.mca_close_component = Some(close);
    v.mca_register_component_params = Some(register);
    c.collm_init_query = Some(init_query);
    c.collm_comm_query = Some(comm_query);
    c
}

fn component_ptr() -> *const ffi::mca_base_component_t {
    // SAFETY: taking the address of our own static; no reference is formed.
    unsafe { addr_of!(mca_coll_hwbarr_component.collm_version) }
}

unsafe extern "C" fn close() -> c_int {
    guard("close", ffi::SUCCESS, || {
        progress::shutdown();
        probe::report();
        probe::report_pairs();
        ffi::SUCCESS
    })
}

/// At component open (MPI_Init, ompi_info): refuse to run inside an Open
/// MPI release line other than the one we were built for (their coll
/// structures differ); then register the parameters. Either failure
/// leaves hwbarr out of the job, with one (aggregated) message.
unsafe extern "C" fn register() -> c_int {
    guard("register", ffi::ERROR, || {
        report::init();
        if let Some(msg) = version_mismatch() {
            if speaks_for_job() {
                report::warn(Topic::VersionMismatch, &msg);
            }
            return ffi::ERROR;
        }
        // SAFETY: the pointer is our component's version block.
        let rc = unsafe { params::register(component_ptr()) };
        if rc != ffi::SUCCESS {
            // Open MPI has named the parameter and its valid values; we
            // say what it means at init_query (two help messages in one
            // burst garble 4.1's aggregation).
            INVALID_VALUE.store(true, Relaxed);
        }
        report::set_verbosity(params::current().verbose);
        // SAFETY: as above.
        unsafe { crate::ompi::pvar::register(component_ptr()) }
    })
}

/// Open MPI refused one of our parameter values at registration.
static INVALID_VALUE: AtomicBool = AtomicBool::new(false);

/// Job-wide messages (every rank finds the same) come from one process:
/// world rank 0, or a process no launcher started (ompi_info,
/// singletons). Many ranks sending help messages during MPI_Init make
/// Open MPI 4.1's aggregation drop some ("ORTE_ERROR_LOG: Data unpack
/// would read past end of buffer" in show_help.c), even Open MPI's own.
fn speaks_for_job() -> bool {
    report::world_rank().is_none_or(|r| r == "0")
}

/// "host:pid (rank N)" of this process, for messages.
fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let rank = report::world_rank().map(|r| format!(" (rank {r})")).unwrap_or_default();
    format!("{}:{}{rank}", host.trim(), std::process::id())
}

/// The one-line complaint when the running Open MPI is not the release
/// line this file was built for, None when it is.
fn version_mismatch() -> Option<String> {
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: three valid out-pointers; MPI_Get_library_version may be
    // called before MPI_Init.
    let rc = unsafe { ffi::hwb_runtime_version(&mut major, &mut minor, &mut release) };
    let (bm, bn, _) = ffi::abi::OMPI_VERSION;
    if rc != 0 || (major as u32, minor as u32) == (bm, bn) {
        return None;
    }
    Some(format!(
        "this mca_coll_hwbarr.so was built for {} but is loaded by Open MPI {major}.{minor}.{release}",
        ffi::abi::BUILT_FOR
    ))
}

/// `--mca coll hwbarr` alone (how the TUC component was selected) leaves
/// every other collective without a provider, and Open MPI then fails
/// MPI_Init with an obscure "Not found". Say what to write instead: nothing,
/// or a list that keeps every coll component this Open MPI has (what it
/// selects from without a list: inter for intercommunicators, sync, ...).
fn sole_component_advice() -> Option<String> {
    // SAFETY: returns Open MPI's own NUL-terminated value or NULL.
    let list = unsafe { c_str(ffi::hwb_coll_selection()) }?;
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names != ["hwbarr"] {
        return None;
    }
    Some(format!(
        "'--mca coll hwbarr' allows no other coll component: write nothing (once installed, hwbarr serves \
         MPI_Barrier by its priority), or '--mca coll {}' (every coll component of this Open MPI)",
        recommended_list(&coll_components()).join(",")
    ))
}

/// Copies a NUL-terminated string Open MPI owns.
///
/// # Safety
/// `p` is NULL or a valid NUL-terminated string.
unsafe fn c_str(p: *const c_char) -> Option<String> {
    // SAFETY: see above.
    (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The coll components this Open MPI has: those built into it and the
/// `mca_coll_<name>.so` files on its component path.
fn coll_components() -> Vec<String> {
    let mut names = vec![];
    for i in 0.. {
        // SAFETY: returns a component's static name or NULL past the last.
        match unsafe { c_str(ffi::hwb_coll_static_component(i)) } {
            Some(n) => names.push(n),
            None => break,
        }
    }
    // SAFETY: returns Open MPI's own NUL-terminated value or NULL.
    let path = unsafe { c_str(ffi::hwb_component_path()) }.unwrap_or_default();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if let Some(n) = file.strip_prefix("mca_coll_").and_then(|f| f.strip_suffix(".so")) {
                names.push(n.to_string());
            }
        }
    }
    names
}

/// hwbarr first, then every other component once, by name.
fn recommended_list(found: &[String]) -> Vec<String> {
    let mut rest: Vec<String> = found.iter().filter(|n| *n != "hwbarr").cloned().collect();
    rest.sort();
    rest.dedup();
    std::iter::once("hwbarr".to_string()).chain(rest).collect()
}

/// At MPI_Init: check the prerequisites.
unsafe extern "C" fn init_query(_progress_threads: bool, _mpi_threads: bool) -> c_int {
    guard("init_query", ffi::ERROR, || {
        if INVALID_VALUE.load(Relaxed) {
            if speaks_for_job() {
                report::warn(Topic::InvalidValue, &process_name());
            }
            return ffi::ERROR;
        }
        if let Some(advice) = sole_component_advice() {
            if speaks_for_job() {
                report::warn(Topic::SoleComponent, &advice);
            }
        }
        if !cfg!(target_os = "linux") {
            return ffi::ERROR;
        }
        ffi::SUCCESS
    })
}

/// Per communicator: accept intra-communicators of 2 or more ranks (on one
/// node, or spanning nodes: hierarchical); decline the rest so other
/// components serve them.
unsafe extern "C" fn comm_query(comm: *mut Comm, priority: *mut c_int) -> *mut Module {
    guard("comm_query", null_mut(), || {
        let p = params::current();
        let requested = p.algorithm;
        if p.priority <= 0 {
            return null_mut();
        }
        // SAFETY: Open MPI passes a live communicator under construction.
        let (inter, size, rank, cid) = unsafe {
            (
                ffi::hwb_comm_is_inter(comm) != 0,
                ffi::hwb_comm_size(comm),
                ffi::hwb_comm_rank(comm),
                ffi::hwb_comm_cid(comm),
            )
        };
        let why_not = if inter {
            Some("intercommunicator")
        } else if size < 2 {
            Some("fewer than 2 ranks")
        } else {
            None
        };
        if let Some(why) = why_not {
            if p.verbose >= 3 {
                report::verbose(3, &format!("declining communicator cid {cid}: {why}"));
            }
            return null_mut();
        }
        // SAFETY: as above; looks only at procs Open MPI already has (a
        // peer it has not created yet is on another node), creating none.
        let multi_node = unsafe { ffi::hwb_comm_has_remote_peers(comm) } != 0;
        // SAFETY: as above, counting procs Open MPI already has.
        let local_ranks = usize::try_from(unsafe { ffi::hwb_comm_local_ranks(comm) }).unwrap_or(1);
        if p.verbose >= 3 && p.topology == Topology::Auto {
            node::say_place_once();
        }
        let facts = node::policy_facts(&p, local_ranks);
        crate::shm::kept::KEPT.set(i64::from(p.kept_segments));
        let opts = Options {
            requested,
            inter: p.inter,
            verbose: p.verbose,
            policy: facts.policy(),
            topology: p.topology,
            own_place: node::NODE.place,
            crowd: facts.crowd(),
            facts: Some(facts),
            stall_notice: (p.stall_notice > 0).then(|| std::time::Duration::from_secs(p.stall_notice as u64)),
            line_candidates: usize::try_from(p.line_candidates).unwrap_or(1),
            line_poll_gap_ns: f64::from(p.line_poll_gap.max(0)),
        };
        // SAFETY: the communicator under construction outlives its module,
        // which `new_module` links to the state before any request exists.
        let server = unsafe { Server::new(comm, comm::Comm::new(Pml::new(comm), rank, size, cid, multi_node, opts)) };
        let m = module::new_module(server);
        if !m.is_null() {
            // SAFETY: Open MPI passes a valid out-pointer.
            unsafe { *priority = p.priority };
        }
        m
    })
}

#[cfg(test)]
mod tests {
    use super::recommended_list;

    #[test]
    fn the_recommended_list_is_hwbarr_and_every_other_component_once() {
        let found: Vec<String> =
            ["tuned", "inter", "hwbarr", "basic", "self", "tuned", "sync"].iter().map(|s| s.to_string()).collect();
        assert_eq!(recommended_list(&found), ["hwbarr", "basic", "inter", "self", "sync", "tuned"]);
        assert_eq!(recommended_list(&[]), ["hwbarr"]);
    }
}
