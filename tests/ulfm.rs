//! Open MPI's fault tolerance (ULFM: 5.0 and later, `mpirun --with-ft
//! ulfm`): a process that dies, or MPIX_Comm_revoke, ends the barriers
//! hwbarr has in flight with the error ULFM defines, and the shrunk
//! communicator gets hwbarr's barriers again.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Whether this Open MPI has ULFM ("FT MPI support: yes": 5.0 and later,
/// unless built without it); says why not.
fn has_ulfm() -> bool {
    let out = Command::new("ompi_info").output().expect("ompi_info");
    let yes = String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == "FT MPI support: yes");
    if !yes {
        eprintln!("skipped: Open MPI {} has no MPI fault tolerance (ULFM)", ompi_major());
    }
    yes
}

/// tests/ulfm.c, built once with this Open MPI's mpicc.
fn ulfm_program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ulfm.c");
        let exe = target_dir().join("ulfm");
        let st = Command::new("mpicc").args(["-O1", "-Wall", "-o"]).arg(&exe).arg(&src).status().expect("run mpicc");
        assert!(st.success(), "mpicc {src:?}");
        exe
    })
}

/// Seconds a job may take (one takes 1-2 s).
const LIMIT: u32 = 20;

/// One launch of the program with fault tolerance on: every survivor
/// prints its OK line (the program checks that its barrier was in flight
/// when the failure came, and ended with the error ULFM defines), hwbarr
/// served the duplicate and the shrunk communicator (`rounds` barriers of
/// each of 3 kinds on each, per rank), and every survivor's hwbarr heard
/// from Open MPI that the duplicate's collectives were revoked.
fn ulfm_job(exe: &Path, np: usize, how: &str, wait: &str, hosts: Option<&str>, mca: &[(&'static str, &str)]) {
    let rounds = 50;
    let what = format!("np {np}, {how} while the others wait in {wait}, hosts {hosts:?}, {mca:?}");
    let root = scratch("ulfm");
    let mut launch = vec!["-np".to_string(), np.to_string(), "--with-ft".into(), "ulfm".into()];
    let (mut rte, mut all): (Params, Params) = (vec![], vec![]);
    if let Some(h) = hosts {
        launch.extend(["--host".into(), h.into()]);
        (rte, all) = fake_node_setup();
    }
    all.extend(mca.iter().map(|&(k, v)| (k, v.to_string())));
    all.push(("coll_hwbarr_verbose", "2".into()));
    // Open MPI's MPI_Finalize after a process failure may wait for ever
    // in its closing PMIx fence, with hwbarr or without: when the launcher
    // deregisters the dead rank before its PMIx server has seen the rank's
    // connection drop, the server still counts the rank in the fence
    // (docs/testing.md). Open MPI's own switch leaves that fence out; the
    // fault-tolerant drain before it (a shrink of MPI_COMM_WORLD, which
    // hwbarr is offered and releases, and a ring barrier) stays.
    all.push(("async_mpi_finalize", "1".into()));
    let mut c =
        mpirun_prefix(&launch.iter().map(String::as_str).collect::<Vec<_>>(), &pairs(&rte), &pairs(&all), LIMIT);
    c.arg(exe).args([how, wait, &rounds.to_string()]);
    set_env(&mut c, &[("HWBARR_FAKENODE_ROOT", root.to_str().unwrap())]);
    let job = run(c, LIMIT);
    let _ = std::fs::remove_dir_all(&root);
    // The ranks that fail: one, or every rank on the last node.
    let slots = hosts.map(host_slots).unwrap_or_default();
    assert!(hosts.is_none() || slots.iter().sum::<usize>() == np, "{what}: the hosts' slots must hold the {np} ranks");
    let lost = match how {
        "kill" => 1,
        "node" => *slots.last().expect("a lost node needs hosts"),
        _ => 0,
    };
    let survivors = np.checked_sub(lost).expect("more ranks lost than launched");
    let ok = format!("ulfm {how} {wait} OK");
    let finished = job.stdout().matches(&ok).count();
    assert!(job.ok() && !job.timed_out(), "{what}: {}", job.dump());
    assert_eq!(finished, survivors, "{what}: {}", job.dump());
    let err = job.stderr();
    let served: Vec<&str> =
        err.lines().filter(|l| l.contains(&format!(": served {} barriers with ", 3 * rounds))).collect();
    // Each survivor on the duplicate, and on the shrunk communicator
    // unless it has one rank (hwbarr declines those).
    let shrunk = if survivors > 1 { survivors } else { 0 };
    assert_eq!(served.len(), survivors + shrunk, "{what}: {}", job.dump());
    // Across nodes, the hierarchical barrier served: on the duplicate (a
    // leader's line names the barrier between nodes) and, where a lost
    // node leaves survivors alone on theirs (1+1+2), on every communicator.
    let between = served.iter().filter(|l| l.contains(" between nodes")).count();
    let survivors_alone = how == "node" && slots.len() > 2 && slots[..slots.len() - 1].iter().all(|&k| k == 1);
    if survivors_alone {
        assert_eq!(between, served.len(), "{what}: {}", job.dump());
    } else if hosts.is_some() {
        assert!(between > 0, "{what}: no barrier between nodes: {}", job.dump());
    }
    let told: BTreeSet<&str> = err
        .lines()
        .filter(|l| l.contains("collectives revoked by Open MPI") && l.contains("DUP FROM 0"))
        .filter_map(|l| l.rsplit_once(", rank ").map(|(_, r)| r.trim_end_matches(')')))
        .collect();
    assert_eq!(told.len(), survivors, "{what}: each survivor told of the revocation: {}", job.dump());
}

/// On one node, `how` while the others wait in each kind of barrier
/// (spinning at 2 ranks, asleep at 4 on 2 cores), and at 3 ranks in
/// `alg_wait` with each algorithm.
fn on_one_node(how: &str, alg_wait: &str) {
    if !has_ulfm() {
        return;
    }
    let exe = ulfm_program();
    for np in [2, 4] {
        for wait in ["barrier", "ibarrier", "persistent"] {
            ulfm_job(exe, np, how, wait, None, &[]);
        }
    }
    for alg in ["counter", "toggle", "polled", "line", "linear"] {
        ulfm_job(exe, 3, how, alg_wait, None, &[("coll_hwbarr_algorithm", alg)]);
    }
}

/// One rank SIGKILLed while the others wait, then the survivors shrink
/// and barrier on.
#[test]
fn a_dead_rank_ends_the_barriers_in_flight_with_proc_failed() {
    on_one_node("kill", "barrier");
}

/// MPIX_Comm_revoke by a rank outside the barrier the others wait in.
#[test]
fn a_revoked_communicator_ends_the_barriers_in_flight_with_revoked() {
    on_one_node("revoke", "ibarrier");
}

/// Across fake nodes (2+2): the rank that dies or revokes is on the
/// other node, or every rank of the other node dies (its leader and its
/// shared memory at once), and hwbarr's barrier is the hierarchical one.
/// Then a node of 2 ranks is lost from 3 nodes (1+1+2): the shrunk
/// communicator spans the 2 nodes left.
#[test]
fn fake_nodes_dead_or_revoking_rank_ends_the_barriers_in_flight() {
    if !has_ulfm() {
        return;
    }
    let exe = ulfm_program();
    for how in ["kill", "node", "revoke"] {
        for wait in ["barrier", "ibarrier", "persistent"] {
            ulfm_job(exe, 4, how, wait, Some("nodea:2,nodeb:2"), &[]);
        }
    }
    ulfm_job(exe, 4, "node", "barrier", Some("nodea:1,nodeb:1,nodec:2"), &[]);
}
