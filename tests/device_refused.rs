//! The device refused (tests/fault_preload.c): every rank falls back together, the messages.

mod common;
use common::*;

/// The device refused on every rank (memfd_create fails): whatever kind
/// of barrier comes first — blocking, non-blocking, persistent, or
/// ordering A (one rank blocks in MPI_Barrier while its MPI_Ibarrier is
/// still in flight, the others wait for theirs first) — the job completes,
/// every barrier is a barrier, and rank 0 says once that hwbarr fell back.
/// At 4 ranks a blocking barrier that overtook the non-blocking ones
/// queued before it (a bug once) hung or broke the semantics every time.
#[test]
fn device_refused_everywhere_falls_back_together() {
    for np in [2, 3, 4] {
        for alg in ["counter", "toggle"] {
            for first in FIRSTS {
                let job = fault_job(np, alg, "memfd", "all", first, 300, 60);
                let what = format!("np={np} {alg} first={first}");
                assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
                assert_eq!(job.stdout().matches(&format!("first {first} OK")).count(), np, "{what}\n{}", job.dump());
                let err = job.stderr();
                let lines = fallback_lines(&err);
                assert_eq!(lines.len(), 1, "{what}: one message\n{}", job.dump());
                assert!(
                    lines[0].contains("cannot create shared memory") && lines[0].contains("not implemented"),
                    "{}",
                    lines[0]
                );
            }
        }
    }
}

/// hwbarr's linear barrier agreed on (no device at all): blocking,
/// non-blocking and persistent barriers mixed, with blocking ones issued
/// while non-blocking ones are in flight, keep barrier semantics.
#[test]
fn linear_mixes_blocking_and_nonblocking_barriers() {
    for np in [3, 4] {
        for first in FIRSTS {
            let job = fault_job(np, "linear", "none", "all", first, 300, 60);
            let what = format!("np={np} linear first={first}");
            assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
            assert_eq!(job.stdout().matches(&format!("first {first} OK")).count(), np, "{what}\n{}", job.dump());
            assert!(fallback_lines(&job.stderr()).is_empty(), "{what}\n{}", job.dump());
        }
    }
}

/// The device refused on some ranks only. Rank 0 creates the segment, so
/// memfd refused elsewhere changes nothing; a peer that cannot map it (mmap
/// refused, or rank 0 not dumpable so /proc/<pid>/fd is closed to peers)
/// makes every rank fall back, and rank 0's one message names that peer.
#[test]
fn device_refused_on_some_ranks() {
    let cases = [
        ("memfd", "1,2", None),
        ("memfd", "0", Some("cannot create shared memory: Function not implemented")),
        ("mmap", "1", Some("rank 1 cannot map the segment: Operation not permitted")),
        ("nodump", "0", Some("cannot map the segment: Permission denied")),
    ];
    for (i, (fault, ranks, want)) in cases.into_iter().enumerate() {
        for (j, first) in FIRSTS.into_iter().enumerate() {
            let alg = if (i + j) % 2 == 0 { "counter" } else { "toggle" };
            let job = fault_job(3, alg, fault, ranks, first, 100, 60);
            let what = format!("{fault} on {ranks}, {alg}, first={first}");
            assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
            assert_eq!(job.stdout().matches(&format!("first {first} OK")).count(), 3, "{what}\n{}", job.dump());
            let err = job.stderr();
            let lines = fallback_lines(&err);
            match want {
                None => {
                    assert!(lines.is_empty(), "{what}\n{}", job.dump());
                    assert!(err.contains(&format!("barriers served by {alg}")), "{what}\n{}", job.dump());
                }
                Some(w) => {
                    assert_eq!(lines.len(), 1, "{what}: one message\n{}", job.dump());
                    assert!(lines[0].contains(w), "{what}: {}", lines[0]);
                }
            }
        }
    }
}

/// memfd refused everywhere under the full semantics check (world, dup,
/// splits, overlapping subsets, short-lived dups, blocking barriers with
/// random delays): every communicator falls back, each says so once.
#[test]
fn device_refused_semantics() {
    let b = board();
    let launch = fault_launch("memfd", "all", "blocking");
    let launch: Vec<&str> = launch.iter().map(String::as_str).collect();
    let job = {
        let _g = lock();
        let out = launch_cmd(
            4,
            &launch,
            &[("coll_hwbarr_algorithm", "auto"), ("coll_hwbarr_verbose", "1")],
            &[("HWBARR_BOARD", b.to_str().unwrap())],
            &["semantics", "300"],
            120,
        )
        .output()
        .expect("run mpirun");
        Job { out, timed_out: false }
    };
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("semantics OK").count(), 4, "{}", job.dump());
    let err = job.stderr();
    let lines = fallback_lines(&err);
    // World, dup, the two halves of the split, the two subsets, the node's
    // ranks, and 3 short-lived dups (some share context ids, not messages).
    assert_eq!(lines.len(), 10, "one message per communicator: {lines:#?}");
    assert!(err.contains("'MPI_COMM_WORLD' (cid 0): no shared-memory device"), "{}", job.dump());
}

/// Without a device (refused, or linear agreed on), rank 0's second
/// MPI_Ibarrier is issued while the first exchange is still in flight and
/// an MPI_Ibcast follows it; the other ranks issue both after their first
/// ibarrier completed (`overlap`). Every rank's non-blocking collectives
/// must keep their call order: when libnbc served the queued ibarrier it
/// took its tag at entry, after the Ibcast's, and 2 of 3 runs failed in
/// libnbc with MPI_ERR_TRUNCATE.
#[test]
fn device_refused_queued_ibarrier_keeps_collective_order() {
    let preload = format!("LD_PRELOAD={}", fault_preload().display());
    for (alg, refused) in [("counter", true), ("toggle", true), ("linear", false)] {
        for np in [3, 4] {
            for _ in 0..2 {
                let launch: Vec<&str> = if refused {
                    vec!["-x", &preload, "-x", "HWBARR_FAULT=memfd", "-x", "HWBARR_FAULT_RANKS=all"]
                } else {
                    vec![]
                };
                let job =
                    run(launch_cmd(np, &launch, &[("coll_hwbarr_algorithm", alg)], &[], &["overlap", "40"], 60), 60);
                let what = format!("np={np} {alg}, device refused: {refused}");
                assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
                assert_eq!(job.stdout().matches("overlap OK").count(), np, "{what}\n{}", job.dump());
                if refused {
                    assert!(
                        job.stderr().contains("every barrier here runs hwbarr's linear barrier over point-to-point"),
                        "{what}\n{}",
                        job.dump()
                    );
                }
            }
        }
    }
}

/// Warnings are topics of the help file installed beside the component,
/// rendered by Open MPI's help system (its box, the topic's explanation);
/// with only the .so (no help file), each is one plain line. On 6.0, whose
/// help system reads no files, hwbarr renders the topics itself from the
/// file built into the .so: the full text with or without the file.
#[test]
fn warnings_come_from_the_help_file() {
    let body = "hwbarr could not set up its shared-memory segment";
    let bare = scratch("bare-component");
    std::fs::copy(target_dir().join("libmca_coll_hwbarr.so"), bare.join("mca_coll_hwbarr.so")).unwrap();
    let bare_path = format!("{}:{}", bare.display(), pkglib());
    for (path, rendered) in [(None, true), (Some(bare_path.as_str()), ompi_major() >= 6)] {
        let b = board();
        let launch = fault_launch("memfd", "all", "blocking");
        let launch: Vec<&str> = launch.iter().map(String::as_str).collect();
        let mut mca = vec![];
        if let Some(p) = path {
            mca.push(("mca_base_component_path", p));
        }
        let job = run(
            launch_cmd(4, &launch, &mca, &[("HWBARR_BOARD", b.to_str().unwrap())], &["semantics", "100"], 120),
            120,
        );
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        assert!(job.ok(), "{}", job.dump());
        let err = job.stderr();
        // One per communicator (world, dup, split halves, subsets, ...).
        let n = fallback_lines(&err).len();
        assert!(n >= 6, "{}", job.dump());
        if rendered {
            assert_eq!(err.matches(body).count(), n, "each with the topic's text: {}", job.dump());
        } else {
            assert_eq!(err.matches(body).count(), 0, "{}", job.dump());
            assert_eq!(err.lines().filter(|l| l.starts_with("coll:hwbarr: communicator")).count(), n, "{}", job.dump());
        }
    }
    let _ = std::fs::remove_dir_all(&bare);
}

/// Across fake nodes: memfd refused on one node's leader (rank 2 leads
/// nodeb) or everywhere. A node without a device runs its local phases
/// over point-to-point; the job completes with every kind of first barrier.
#[test]
fn fake_nodes_device_refused() {
    let so = fault_preload().display().to_string();
    for ranks in ["2", "all"] {
        for first in FIRSTS {
            let b = board();
            let envs = format!(
                "LD_PRELOAD={so};HWBARR_FAULT=memfd;HWBARR_FAULT_RANKS={ranks};HWBARR_FIRST={first};HWBARR_BOARD={}",
                b.display()
            );
            let job = fake_nodes_env_list(
                "nodea:2,nodeb:2",
                &envs,
                &[
                    ("coll_hwbarr_algorithm", "counter"),
                    ("coll_hwbarr_verbose", "2"),
                    (rte::single_copy_param(), "none"),
                ],
                &["first", "60"],
            );
            let _ = std::fs::remove_dir_all(b.parent().unwrap());
            let what = format!("memfd refused on {ranks}, first={first}");
            assert!(job.ok(), "{what}\n{}", job.dump());
            assert_eq!(job.stdout().matches(&format!("first {first} OK")).count(), 4, "{what}\n{}", job.dump());
            let err = job.stderr();
            // Verbose 2: each node's leader describes its node once for the dup (cid 3).
            let node_lines: Vec<&str> = err.lines().filter(|l| l.contains("(cid 3, 4 ranks on 2 nodes)")).collect();
            assert_eq!(node_lines.len(), 2, "{what}\n{}", job.dump());
            let p2p = node_lines
                .iter()
                .filter(|l| l.contains("linear over point-to-point (no shared memory: cannot create"))
                .count();
            assert_eq!(p2p, if ranks == "all" { 2 } else { 1 }, "{what}\n{}", job.dump());
            // Each rank's served line names what its node ran.
            let served: Vec<&str> = err.lines().filter(|l| l.contains(" of communicator cid 3: served ")).collect();
            let ran = |what: &str| {
                served.iter().filter(|l| l.contains(&format!(" barriers with {what} on its node"))).count()
            };
            let refused = if ranks == "all" { 4 } else { 2 };
            assert_eq!(
                (served.len(), ran("linear over point-to-point"), ran("counter")),
                (4, refused, 4 - refused),
                "{what}\n{}",
                job.dump()
            );
        }
    }
}
