//! Facts about this node and job, read once (on the first communicator,
//! after MPI_Init has registered its parameters), and the waiting policy
//! they give a communicator.

use std::sync::LazyLock;

use crate::ompi::ffi;
use crate::ompi::params::Params;
use crate::topology::{self, Place, Reported};
use crate::wait::PolicyFacts;

pub struct NodeFacts {
    /// Ranks of this job on this node (`job_local_ranks`).
    pub local_ranks: usize,
    pub cores: usize,
    /// The job's `mpi_yield_when_idle`.
    pub yield_when_idle: bool,
    /// Where this process may run in the node's caches (`topology`).
    pub place: Place,
    /// How `place` was found, for verbose output.
    pub place_from: String,
    /// MPI_THREAD_MULTIPLE: threads may wait in barriers at once.
    pub thread_multiple: bool,
}

pub static NODE: LazyLock<NodeFacts> = LazyLock::new(|| {
    // SAFETY: reads a count the runtime's init (MPI_Init or the first
    // session) set before any communicator chooses its collectives; NODE is
    // first used in comm_query, never in ompi_info's component register.
    let open_mpi = usize::try_from(unsafe { ffi::hwb_job_local_ranks() }).ok();
    let launcher = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE").ok().and_then(|s| s.parse().ok());
    let local_ranks = job_local_ranks(open_mpi, launcher);
    // SAFETY: as above, a number the runtime's init set.
    let local_rank = unsafe { ffi::hwb_job_local_rank() };
    crate::contention::set_node_rank(u32::try_from(local_rank).unwrap_or(0));
    let cores = cores_online();
    let place = own_place(local_ranks <= cores);
    NodeFacts {
        local_ranks,
        cores,
        // SAFETY: reads an MCA variable; no preconditions past MPI_Init's start.
        yield_when_idle: unsafe { ffi::hwb_mpi_yield_when_idle() } != 0,
        place: place.0,
        place_from: place.1,
        // SAFETY: reads a flag MPI_Init sets before it selects collectives.
        thread_multiple: unsafe { ffi::hwb_mpi_thread_multiple() } != 0,
    }
});

/// Ranks of this job on this node: the count Open MPI got from PMIx
/// (`open_mpi`: under mpirun and under a direct launch such as `srun`, which
/// sets no `OMPI_COMM_WORLD_LOCAL_SIZE`), or mpirun's variable (`launcher`)
/// if it says more; 1 when neither is known.
fn job_local_ranks(open_mpi: Option<usize>, launcher: Option<usize>) -> usize {
    open_mpi.into_iter().chain(launcher).max().unwrap_or(1).max(1)
}

/// This process's place in the node's caches (`topology::own_place_and_source`) and
/// how it was found: from the binding Open MPI's runtime reports where the
/// process runs as reported, else from this process's binding and sysfs,
/// where the CPU it runs on counts only when every rank of the node has a
/// core.
fn own_place(core_each: bool) -> (Place, String) {
    // SAFETY: called after MPI_Init's runtime init (NODE's first use);
    // returns a malloc'ed string or NULL.
    let locality = unsafe { ffi::take_string(ffi::hwb_locality_string()) };
    // SAFETY: as above. Asked only when there is a report to check.
    let cpus = locality.as_ref().and_then(|_| unsafe { ffi::take_string(ffi::hwb_cpuset_string()) });
    let reported = locality.as_deref().map(|locality| Reported { locality, cpus: cpus.as_deref() });
    // SAFETY: sched_getcpu has no preconditions; -1 on failure.
    let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let sysfs = std::path::Path::new("/sys/devices/system/cpu");
    topology::own_place_and_source(reported, status.as_deref(), sysfs, cpu, core_each, cores_online())
}

/// At verbosity 3, once per process (on its first communicator, with
/// `coll_hwbarr_topology auto`): where this rank sits in the node's caches,
/// which the toggle tree follows, and how that was found.
pub fn say_place_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let n = &*NODE;
        let rank = crate::ompi::report::world_rank_label();
        crate::ompi::report::verbose(3, &format!(
            "world rank {rank}: place in the node's caches: {} ({})",
            n.place.describe(),
            n.place_from
        ));
    });
}

/// What the waiting policy of a communicator with parameters `p` and
/// `comm_local_ranks` ranks on this node (by Open MPI's count; ranks of
/// several jobs joined by MPI_Comm_spawn or MPI_Comm_connect among them,
/// which the job's count does not see) is chosen from.
pub fn policy_facts(p: &Params, comm_local_ranks: usize) -> PolicyFacts {
    let node = &*NODE;
    PolicyFacts {
        job_ranks: node.local_ranks,
        comm_ranks: comm_local_ranks,
        cores: node.cores,
        yield_when_idle: node.yield_when_idle,
        spin: p.spin,
        idle: p.idle,
        thread_multiple: node.thread_multiple,
    }
}

/// Cores online on this machine (not the affinity mask: oversubscription is
/// about the machine, whatever a rank is bound to).
pub fn cores_online() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::job_local_ranks;

    #[test]
    fn the_job_count_comes_from_open_mpi_without_the_launchers_variable() {
        // Direct launch: no OMPI_COMM_WORLD_LOCAL_SIZE, PMIx's count stands.
        assert_eq!(job_local_ranks(Some(4), None), 4);
        assert_eq!(job_local_ranks(Some(4), Some(4)), 4);
        assert_eq!(job_local_ranks(Some(2), Some(6)), 6);
        assert_eq!(job_local_ranks(None, Some(3)), 3);
        assert_eq!(job_local_ranks(None, None), 1);
        assert_eq!(job_local_ranks(Some(0), None), 1);
    }
}
