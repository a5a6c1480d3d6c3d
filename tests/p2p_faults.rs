//! hwbarr's own point-to-point operations fail (fault-injection build): the error reaches every rank.

mod common;
use common::*;

/// The device bootstrap (first barrier on one node): hwbarr's first
/// operation fails on every rank (rank 0's offer, the peers' receive of
/// it), or its last (rank 0's verdict, the peer's receive of it).
#[test]
fn p2p_failure_in_the_bootstrap_reaches_every_rank() {
    with_component_path(fault_component_path(), || {
        for kind in KINDS {
            for np in [2, 3, 4] {
                let job = p2p_job(np, None, "1", kind, "", 20);
                assert_error_everywhere(&job, np, 1, &format!("bootstrap first op, np {np} {kind}"));
            }
            let job = p2p_job(2, None, "0:3,1:3", kind, "", 20);
            assert_error_everywhere(&job, 2, 1, &format!("bootstrap verdict, {kind}"));
        }
    });
}

/// The layout exchange (first barrier across fake nodes): every rank's
/// first operation fails.
#[test]
fn p2p_failure_in_the_layout_exchange_reaches_every_rank() {
    with_component_path(fault_component_path(), || {
        for kind in KINDS {
            let job = p2p_job(4, Some("nodea:2,nodeb:2"), "1", kind, "", 20);
            assert_error_everywhere(&job, 4, 1, &format!("layout exchange, {kind}"));
        }
    });
}

/// The leaders' messages of a later barrier across fake nodes, where every
/// rank leads its node: 1+1 (counter broadcast; the exchange takes 2
/// operations per rank, each barrier 2, so operation 9 is barrier 5's
/// first) and 4×1 (dissemination, 2 rounds of 2; rank 0's exchange takes
/// 6 operations, the others' 2, so barrier 3 starts at 11 and 7).
#[test]
fn p2p_failure_in_the_leaders_messages_reaches_every_rank() {
    with_component_path(fault_component_path(), || {
        for kind in KINDS {
            let job = p2p_job(2, Some("nodea:1,nodeb:1"), "9", kind, "", 20);
            assert_error_everywhere(&job, 2, 5, &format!("leaders 1+1, {kind}"));
            let job = p2p_job(4, Some("nodea:1,nodeb:1,nodec:1,noded:1"), "0:11,1:7,2:7,3:7", kind, "", 20);
            assert_error_everywhere(&job, 4, 3, &format!("leaders 4x1, {kind}"));
        }
    });
}

/// An operation that fails on one rank only: the failure notices and the
/// device's failure word bring the error to every rank. On one node (3
/// ranks) every operation of rank 0 and of rank 2 in the device exchange
/// (rank 0: 2 receives, 2 offers, 2 verdicts; the others: the offer, the
/// verdict's receive, the answer). Across 2+2 fake nodes a sample of the
/// layout exchange (rank 0: 6 operations, the others 2), the nodes' device
/// exchanges (3 each) and the leaders' messages (2 per barrier): the cases
/// where the failing rank is the only one to know at first. The unit tests
/// (src/failure_tests.rs) make every operation fail in turn, in memory.
#[test]
fn p2p_failure_on_one_rank_reaches_every_rank() {
    /// Operation `op` of `rank` fails; its error is expected at barrier `at`.
    struct Case {
        np: usize,
        hosts: Option<&'static str>,
        rank: usize,
        op: u32,
        at: u32,
        kind: &'static str,
    }
    with_component_path(fault_component_path(), || {
        let one = |rank, op, kind| Case { np: 3, hosts: None, rank, op, at: 1, kind };
        let mut cases: Vec<Case> = (1..=6).map(|op| one(0, op, "blocking")).collect();
        cases.extend((1..=3).map(|op| one(2, op, KINDS[op as usize - 1])));
        cases.extend([one(0, 4, "nonblocking"), one(0, 6, "persistent")]);
        for (rank, op, at, kind) in [
            (0, 1, 1, "blocking"),
            (0, 4, 1, "nonblocking"),
            (0, 7, 1, "blocking"),
            (0, 9, 1, "persistent"),
            (0, 10, 2, "blocking"),
            (0, 11, 2, "nonblocking"),
            (2, 2, 1, "blocking"),
            (2, 4, 1, "blocking"),
            (2, 7, 2, "persistent"),
            (3, 1, 1, "nonblocking"),
            (3, 5, 1, "blocking"),
        ] {
            cases.push(Case { np: 4, hosts: Some("nodea:2,nodeb:2"), rank, op, at, kind });
        }
        for c in cases {
            let spec = format!("{}:{}", c.rank, c.op);
            let job = p2p_job(c.np, c.hosts, &spec, c.kind, "", 20);
            let what = format!("operation {} of rank {} fails, {}, np {} on {:?}", c.op, c.rank, c.kind, c.np, c.hosts);
            assert_error_reaches_all(&job, c.np, Some(c.rank), c.at, &what);
        }
    });
}

/// The device refused on every rank, so the device exchange decides to
/// fall back, and rank 0's send of that verdict to one member fails:
/// falling back is no error, so rank 0 sends the verdict again and every
/// rank falls back without an error (rank 0 says so).
#[test]
fn p2p_failure_of_a_fallback_verdict_sends_it_again() {
    with_component_path(fault_component_path(), || {
        for (spec, kind) in [("0:5", "blocking"), ("0:6", "nonblocking"), ("0:5", "persistent")] {
            let job = p2p_job_with(3, None, spec, kind, "", 20, Some("memfd"));
            let what = format!("{spec} {kind}");
            assert!(job.ok(), "{what}\n{}", job.dump());
            let out = job.stdout();
            assert_eq!(
                out.matches(&format!("p2pfault {kind}: no error in 20 barriers")).count(),
                3,
                "{what}\n{}",
                job.dump()
            );
            let err = job.stderr();
            assert_eq!(
                err.matches("fallback verdict of the device exchange to rank").count(),
                1,
                "{what}\n{}",
                job.dump()
            );
            assert!(err.contains("no shared-memory device"), "{what}\n{}", job.dump());
        }
    });
}

/// The device refused on every rank, so every barrier runs hwbarr's linear
/// barrier; blocking, non-blocking and persistent ones in turn; then one
/// point-to-point operation of rank 0 (the gatherer) or of rank 3 fails.
/// Every rank gets an MPI error, at the failing rank's barrier or the one
/// after: a rank released before the failure meets rank 0's notice in its
/// next barrier, whatever its kind. (When blocking barriers went to the
/// component below, such a rank hung there or got MPI_ERR_TRUNCATE.)
#[test]
fn p2p_failure_after_a_fallback_reaches_every_rank() {
    with_component_path(fault_component_path(), || {
        for (rank, ops) in [(0usize, &[12u32, 14, 17, 20, 23, 27][..]), (3, &[5, 6, 8, 9][..])] {
            for &op in ops {
                let job = p2p_job_with(4, None, &format!("{rank}:{op}"), "mixed", "", 12, Some("memfd"));
                let what = format!("memfd refused, rank {rank}'s operation {op} fails");
                let out = job.stdout();
                let at = out
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix(&format!("rank {rank}: p2pfault mixed: error at barrier "))?
                            .split(':')
                            .next()?
                            .parse()
                            .ok()
                    })
                    .unwrap_or_else(|| panic!("{what}: the failing rank saw no error\n{}", job.dump()));
                eprintln!("{what}: error at barrier {at}");
                assert!(at >= 2, "{what}: the fault hit the device exchange, not the fallback\n{}", job.dump());
                assert_error_reaches_all(&job, 4, Some(rank), at, &what);
                let err = job.stderr();
                let dup_lines = fallback_lines(&err).into_iter().filter(|l| l.contains("(cid 3)")).count();
                assert_eq!(dup_lines, 1, "{what}: the dup's fallback, said once\n{}", job.dump());
            }
        }
    });
}

/// An application that aborts on the error ends the job (rank 2 learns of
/// the failure of rank 0's verdict only at its next barrier).
#[test]
fn p2p_failure_on_one_rank_and_abort_ends_the_job() {
    with_component_path(fault_component_path(), || {
        let job = p2p_job(3, None, "0:6", "blocking", "abort", 20);
        assert!(!job.ok() && !job.timed_out(), "{}", job.dump());
        assert!(job.stdout().contains("rank 0: p2pfault blocking: error at barrier 1: class "), "{}", job.dump());
    });
}

/// The switch exists only in the fault-injection build: the default build
/// does not contain it, and with it the same job sees no error.
#[test]
fn default_build_has_no_fault_injection() {
    let default = std::fs::read(target_dir().join("libmca_coll_hwbarr.so")).unwrap();
    let needle = b"HWBARR_FAULT_P2P";
    assert!(!default.windows(needle.len()).any(|w| w == needle), "default build contains the fault switch");
    let path = fault_component_path();
    let fault = std::fs::read(Path::new(path.split(':').next().unwrap()).join("mca_coll_hwbarr.so")).unwrap();
    assert!(fault.windows(needle.len()).any(|w| w == needle), "the fault build lacks it");
    let job = p2p_job(3, None, "1", "blocking", "", 20);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("p2pfault blocking: no error in 20 barriers").count(), 3, "{}", job.dump());
}
