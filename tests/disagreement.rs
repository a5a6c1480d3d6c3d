//! Ranks that disagree (MPMD launches): rank 0's settings win, hwbarr on some ranks only.

mod common;
use common::*;

/// `mpirun -np 1 -x ..algorithm=A ./app : -np k -x ..algorithm=B ./app`:
/// every rank runs rank 0's algorithm, rank 0 names the parameter and the
/// ranks once, and every kind of first barrier completes with barrier
/// semantics (no hang, no truncated message). Linear against the device
/// algorithms both ways too.
#[test]
fn disagreeing_algorithms_run_rank_0s() {
    let pairs = [
        ("toggle", "counter", 1),
        ("counter", "toggle", 2),
        ("linear", "toggle", 1),
        ("toggle", "linear", 2),
        ("linear", "counter", 2),
        ("line", "counter", 1),
    ];
    for (i, (a, b, k)) in pairs.into_iter().enumerate() {
        for (j, first) in FIRSTS.into_iter().enumerate() {
            if (i + j) % 2 == 1 && a != "toggle" {
                continue; // keep the job count down: every pair still meets every first kind below
            }
            let board_file = board();
            let ctx = |alg: &str| {
                vec![
                    format!("OMPI_MCA_coll_hwbarr_algorithm={alg}"),
                    format!("HWBARR_FIRST={first}"),
                    "HWBARR_BOARD".to_string(),
                ]
            };
            let job = mpmd(
                &[(1, ctx(a)), (k, ctx(b))],
                &[],
                &[],
                &[("coll_hwbarr_verbose", "1")],
                &[("HWBARR_BOARD", board_file.to_str().unwrap())],
                &["first", "60"],
                60,
            );
            let _ = std::fs::remove_dir_all(board_file.parent().unwrap());
            let what = format!("rank 0 {a}, {k} rank(s) {b}, first={first}");
            assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
            assert_eq!(job.stdout().matches(&format!("first {first} OK")).count(), 1 + k, "{what}\n{}", job.dump());
            let err = job.stderr();
            let lines = disagreement_lines(&err);
            assert_eq!(lines.len(), 1, "{what}: one message\n{}", job.dump());
            let ranks = if k == 1 { "rank 1".to_string() } else { "ranks 1, 2".to_string() };
            let want = format!("coll_hwbarr_algorithm differs between ranks ({a} on rank 0; {b} on {ranks}); every rank uses rank 0's algorithm ({a})");
            assert!(lines[0].contains(&want), "{what}: want '{want}'\n{}", lines[0]);
            assert!(err.contains(&format!("barriers served by {a}")), "{what}\n{}", job.dump());
        }
    }
}

/// The same job with the same settings everywhere says nothing about
/// disagreement (the message above is not printed by default).
#[test]
fn agreeing_ranks_print_no_disagreement() {
    let b = board();
    let ctx = || {
        vec!["OMPI_MCA_coll_hwbarr_algorithm=toggle".to_string(), "HWBARR_FIRST=order-a".into(), "HWBARR_BOARD".into()]
    };
    let job = mpmd(
        &[(1, ctx()), (1, ctx())],
        &[],
        &[],
        &[("coll_hwbarr_verbose", "1")],
        &[("HWBARR_BOARD", b.to_str().unwrap())],
        &["first", "60"],
        60,
    );
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok(), "{}", job.dump());
    assert!(disagreement_lines(&job.stderr()).is_empty(), "{}", job.dump());
}

/// Every rank asks `auto`, but rank 0 spins (a core of its own) and the
/// others, 4 ranks on 2 cores, sleep: they would resolve `auto` to
/// different algorithms. Rank 0's resolution serves every rank, and that is
/// no disagreement.
#[test]
fn auto_resolved_differently_is_no_disagreement() {
    let b = board();
    let ctx = |idle: Option<&str>| {
        let mut v = vec!["OMPI_MCA_coll_hwbarr_algorithm=auto".to_string(), "HWBARR_FIRST=order-a".into()];
        v.extend(idle.map(|i| format!("OMPI_MCA_coll_hwbarr_idle={i}")));
        v.push("HWBARR_BOARD".into());
        v
    };
    let job = mpmd(
        &[(1, ctx(Some("spin"))), (3, ctx(None))],
        &[],
        &[],
        &[("coll_hwbarr_verbose", "1")],
        &[("HWBARR_BOARD", b.to_str().unwrap())],
        &["first", "20"],
        120,
    );
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok(), "{}", job.dump());
    assert!(disagreement_lines(&job.stderr()).is_empty(), "{}", job.dump());
    assert!(job.stderr().contains("barriers served by polled (auto: 4 ranks"), "{}", job.dump());
}

/// Across fake nodes, nodea's ranks asking for toggle and the counter
/// broadcast, nodeb's for counter and dissemination: rank 0 (on nodea)
/// names both parameters, every rank runs toggle and the counter
/// broadcast, and the full semantics check passes.
#[test]
fn fake_nodes_disagreeing_inter_and_algorithm() {
    let root = scratch("fakenodes");
    let (rte_owned, mca_owned) = fake_node_setup();
    let mut mca = pairs(&mca_owned);
    mca.push(("coll_hwbarr_verbose", "2"));
    let b = board();
    let ctx = |alg: &str, inter: &str, host: &str| {
        vec![
            format!("OMPI_MCA_coll_hwbarr_algorithm={alg}"),
            format!("OMPI_MCA_coll_hwbarr_inter={inter}"),
            "HWBARR_BOARD".to_string(),
            format!("--host={host}"),
        ]
    };
    let job = mpmd(
        &[(2, ctx("toggle", "counter", "nodea:2")), (2, ctx("counter", "dissemination", "nodeb:2"))],
        &[],
        &pairs(&rte_owned),
        &mca,
        &[("HWBARR_FAKENODE_ROOT", root.to_str().unwrap()), ("HWBARR_BOARD", b.to_str().unwrap())],
        &["semantics", "200"],
        240,
    );
    let left = files_under(&root);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(left.is_empty(), "fake nodes left files behind: {left:?}");
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("semantics OK").count(), 4, "{}", job.dump());
    let err = job.stderr();
    let world: Vec<&str> = disagreement_lines(&err).into_iter().filter(|l| l.contains("'MPI_COMM_WORLD'")).collect();
    assert_eq!(world.len(), 1, "{}", job.dump());
    for want in [
        "coll_hwbarr_algorithm differs between ranks (toggle on ranks 0, 1; counter on ranks 2, 3)",
        "coll_hwbarr_inter differs between ranks (counter broadcast on ranks 0, 1; dissemination on ranks 2, 3)",
        "every rank uses rank 0's settings (algorithm toggle, inter counter broadcast)",
    ] {
        assert!(world[0].contains(want), "want '{want}': {}", world[0]);
    }
    assert_eq!(served(&err, 0), vec![200; 4], "{}", job.dump());
    assert!(
        err.contains("(cid 0, 4 ranks on 2 nodes): node of rank 0: 2 ranks, toggle on shared memory"),
        "{}",
        job.dump()
    );
    assert!(err.contains("counter broadcast among leaders"), "{}", job.dump());
}

/// hwbarr selected on some ranks only (coll_hwbarr_priority=0 on the
/// others), with every kind of first barrier: blocking (hwbarr's first
/// exchange against tuned's barrier, on the same tag), non-blocking or
/// persistent (against libnbc's, on its own tag, which hwbarr's lookout
/// watches), on 2 ranks both ways and on 3 ranks with the odd one
/// anywhere (but see below). The job must end at once, not hang, and a
/// hwbarr rank must name a rank that does not run hwbarr.
#[test]
fn hwbarr_on_some_ranks_only_fails_fast() {
    let mut cases: Vec<(Vec<&str>, &str)> = Vec::new();
    for first in FIRSTS {
        cases.push((vec!["40", "0"], first));
        cases.push((vec!["0", "40"], first));
    }
    for prios in [vec!["40", "0", "40"], vec!["40", "40", "0"]] {
        for first in ["blocking", "nonblocking"] {
            cases.push((prios.clone(), first));
        }
    }
    // Not blocking: tuned's barrier on 3 ranks has rank 0 wait for rank 2
    // before it sends anything, while hwbarr's ranks wait for rank 0's
    // offer; nothing is sent, nothing can be seen (README).
    cases.push((vec!["0", "40", "40"], "nonblocking"));
    cases.push((vec!["0", "40", "40"], "persistent"));
    for (prios, first) in cases {
        let b = board();
        let ctx = |prio: &str| {
            vec![
                format!("OMPI_MCA_coll_hwbarr_priority={prio}"),
                format!("HWBARR_FIRST={first}"),
                "HWBARR_BOARD".into(),
            ]
        };
        let contexts: Vec<(usize, Vec<String>)> = prios.iter().map(|p| (1, ctx(p))).collect();
        let job = mpmd(&contexts, &[], &[], &[], &[("HWBARR_BOARD", b.to_str().unwrap())], &["first", "10"], 60);
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        let what = format!("priorities {prios:?}, first={first}");
        assert!(!job.ok() && !job.timed_out(), "{what}: must fail fast\n{}", job.dump());
        let err = job.stderr();
        let named = (0..prios.len())
            .filter(|&r| prios[r] == "0")
            .any(|r| err.contains(&format!("rank {r} does not run hwbarr's barrier on this communicator")));
        // Blocking, the tuned rank may abort first, on hwbarr's message
        // longer than the zero bytes its barrier expects, and the job end
        // before a hwbarr rank has printed (README, "Ranks that disagree").
        let tuned_truncated = first == "blocking"
            && err.contains("An error occurred in MPI_Barrier")
            && err.contains("MPI_ERR_TRUNCATE")
            && aborting_rank(&err).is_some_and(|r| prios.get(r) == Some(&"0"));
        assert!(named || tuned_truncated, "{what}: no hwbarr rank named the other\n{}", job.dump());
    }
}

/// The rank Open MPI's fatal error handler names ("reported by process
/// [<job>,<rank>]").
fn aborting_rank(err: &str) -> Option<usize> {
    let rest = err.split("reported by process [").nth(1)?;
    rest.split(']').next()?.rsplit(',').next()?.trim().parse().ok()
}

/// What still hangs (README, "Ranks that disagree"): 3 ranks, rank 0
/// outside hwbarr, a blocking first barrier. Nothing is sent that a hwbarr
/// rank could see, so the job waits, as MPI allows; after
/// `coll_hwbarr_stall_notice` seconds each waiting hwbarr rank says whom it
/// waits for, once, so that the hang has a name.
#[test]
fn a_first_barrier_that_cannot_meet_says_whom_it_waits_for() {
    let b = board();
    let ctx = |prio: &str| {
        vec![format!("OMPI_MCA_coll_hwbarr_priority={prio}"), "HWBARR_FIRST=blocking".into(), "HWBARR_BOARD".into()]
    };
    let contexts = vec![(1, ctx("0")), (1, ctx("40")), (1, ctx("40"))];
    // `timeout` stops this job, and 4.1's mpirun, stopped, at times leaves
    // its transport's files behind: they go in the scratch directory, not
    // in /dev/shm.
    let scratch = b.parent().unwrap();
    let mca = [("coll_hwbarr_stall_notice", "1"), (transport_dir_param(), scratch.to_str().unwrap())];
    let before = shm_names();
    let job = mpmd(&contexts, &[], &[], &mca, &[("HWBARR_BOARD", b.to_str().unwrap())], &["first", "10"], 10);
    let _ = std::fs::remove_dir_all(scratch);
    assert_eq!(new_job_files_in_shm(&before), Vec::<String>::new(), "left in /dev/shm\n{}", job.dump());
    assert!(job.timed_out(), "the job must hang (else this case is fixed: update the README)\n{}", job.dump());
    let err = job.stderr();
    let tail = "has waited 1 s in the communicator's first barrier for rank 0 to take part in hwbarr's setup exchange";
    for r in [1, 2] {
        let said =
            err.lines().filter(|l| l.starts_with(&format!("rank {r} of communicator '")) && l.ends_with(tail)).count();
        assert_eq!(said, 1, "rank {r} must say it once\n{}", job.dump());
    }
}
