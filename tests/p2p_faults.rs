//! hwbarr's own point-to-point operations fail (fault-injection build): the error reaches every rank.
//!
//! One table, one `#[test]` per row (so that cargo names a failing case):
//! the ranks (how many, on one node or on fake nodes), what is injected
//! (HWBARR_FAULT_P2P: `n` fails every rank's n-th operation, `r:n,...`
//! rank r's n-th; and whether the device is refused too), the barrier kinds
//! the job is run with (one job each), how many barriers, and the outcome.
//! The unit tests (src/exchange/failure_tests.rs) make every operation fail in turn,
//! in memory.

mod common;
use common::*;

/// What a case must end with.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// `Everywhere(at)`: every rank's operation fails; every rank gets an
    /// MPI error at barrier `at` (see `assert_error_everywhere`).
    Everywhere(u32),
    /// `FromRank(r, at)`: only rank r's operation fails, at barrier `at`;
    /// the error reaches every rank (see `assert_error_reaches_all`).
    FromRank(usize, u32),
    /// The device was refused and the failed operation was rank 0's send
    /// of the fallback verdict: falling back is no error, so rank 0 sends
    /// the verdict again, no rank gets an error and rank 0 says so once.
    VerdictResent,
    /// `AfterFallback(r)`: the device was refused, the linear barrier runs;
    /// rank r's operation fails in a later barrier (not the device
    /// exchange), the error reaches every rank, and the dup's fallback is
    /// said once.
    AfterFallback(usize),
    /// `Aborts(r, at)`: the application aborts on the error; the job ends
    /// in failure (not by the timeout) after rank r reported its error at
    /// barrier `at`.
    Aborts(usize, u32),
}
use Outcome::*;

/// One row of the table.
struct Case {
    np: usize,
    /// Fake nodes (`--host`), or one node.
    hosts: Option<&'static str>,
    /// HWBARR_FAULT_P2P.
    spec: &'static str,
    /// The device fault (as in `fault_launch`) injected on every rank too.
    device: Option<&'static str>,
    kinds: &'static [&'static str],
    barriers: u32,
    outcome: Outcome,
}

const ONE_NODE: Option<&str> = None;
const NODES_2_2: Option<&str> = Some("nodea:2,nodeb:2");
const NODES_1_1: Option<&str> = Some("nodea:1,nodeb:1");
const NODES_4X1: Option<&str> = Some("nodea:1,nodeb:1,nodec:1,noded:1");
/// The device works.
const WORKS: Option<&str> = None;
/// The device is refused on every rank (memfd_create fails).
const REFUSED: Option<&str> = Some("memfd");

/// `name: np, hosts, spec, device, [kinds], barriers, outcome;` makes a
/// `#[test] fn name` that runs that case.
macro_rules! p2p_cases {
    ($($name:ident: $np:literal, $hosts:expr, $spec:literal, $device:expr, [$($kind:ident)+], $barriers:literal, $outcome:expr;)+) => {
        $(
            #[test]
            fn $name() {
                let case = Case {
                    np: $np,
                    hosts: $hosts,
                    spec: $spec,
                    device: $device,
                    kinds: &[$(stringify!($kind)),+],
                    barriers: $barriers,
                    outcome: $outcome,
                };
                check(stringify!($name), &case);
            }
        )+
    };
}

p2p_cases! {
    // The device bootstrap (first barrier on one node): hwbarr's first
    // operation fails on every rank (rank 0's offer, the peers' receive of
    // it), or its last (rank 0's verdict, the peer's receive of it).
    // name                          np  hosts      spec                device   kinds                            barriers outcome
    bootstrap_first_op_np2:           2, ONE_NODE,  "1",                WORKS,   [blocking nonblocking persistent], 20, Everywhere(1);
    bootstrap_first_op_np3:           3, ONE_NODE,  "1",                WORKS,   [blocking nonblocking persistent], 20, Everywhere(1);
    bootstrap_first_op_np4:           4, ONE_NODE,  "1",                WORKS,   [blocking nonblocking persistent], 20, Everywhere(1);
    bootstrap_verdict:                2, ONE_NODE,  "0:3,1:3",          WORKS,   [blocking nonblocking persistent], 20, Everywhere(1);

    // The layout exchange (first barrier across fake nodes): every rank's
    // first operation fails.
    layout_exchange_first_op:         4, NODES_2_2, "1",                WORKS,   [blocking nonblocking persistent], 20, Everywhere(1);

    // The leaders' messages of a later barrier across fake nodes, where
    // every rank leads its node: 1+1 (counter broadcast; the exchange takes
    // 2 operations per rank, each barrier 2, so operation 9 is barrier 5's
    // first) and 4×1 (dissemination, 2 rounds of 2; rank 0's exchange takes
    // 6 operations, the others' 2, so barrier 3 starts at 11 and 7).
    leaders_1_1_barrier_5:            2, NODES_1_1, "9",                WORKS,   [blocking nonblocking persistent], 20, Everywhere(5);
    leaders_4x1_barrier_3:            4, NODES_4X1, "0:11,1:7,2:7,3:7", WORKS,   [blocking nonblocking persistent], 20, Everywhere(3);

    // An operation that fails on one rank only: the failure notices and the
    // device's failure word bring the error to every rank. On one node (3
    // ranks) every operation of rank 0 and of rank 2 in the device exchange
    // (rank 0: 2 receives, 2 offers, 2 verdicts; the others: the offer, the
    // verdict's receive, the answer).
    one_node_rank_0_op_1:             3, ONE_NODE,  "0:1",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_0_op_2:             3, ONE_NODE,  "0:2",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_0_op_3:             3, ONE_NODE,  "0:3",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_0_op_4:             3, ONE_NODE,  "0:4",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_0_op_5:             3, ONE_NODE,  "0:5",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_0_op_6:             3, ONE_NODE,  "0:6",              WORKS,   [blocking],                        20, FromRank(0, 1);
    one_node_rank_2_op_1:             3, ONE_NODE,  "2:1",              WORKS,   [blocking],                        20, FromRank(2, 1);
    one_node_rank_2_op_2:             3, ONE_NODE,  "2:2",              WORKS,   [nonblocking],                     20, FromRank(2, 1);
    one_node_rank_2_op_3:             3, ONE_NODE,  "2:3",              WORKS,   [persistent],                      20, FromRank(2, 1);
    one_node_rank_0_op_4_nonblocking: 3, ONE_NODE,  "0:4",              WORKS,   [nonblocking],                     20, FromRank(0, 1);
    one_node_rank_0_op_6_persistent:  3, ONE_NODE,  "0:6",              WORKS,   [persistent],                      20, FromRank(0, 1);
    // Across 2+2 fake nodes a sample of the layout exchange (rank 0: 6
    // operations, the others 2), the nodes' device exchanges (3 each) and
    // the leaders' messages (2 per barrier): the cases where the failing
    // rank is the only one to know at first.
    nodes_2_2_rank_0_op_1:            4, NODES_2_2, "0:1",              WORKS,   [blocking],                        20, FromRank(0, 1);
    nodes_2_2_rank_0_op_4:            4, NODES_2_2, "0:4",              WORKS,   [nonblocking],                     20, FromRank(0, 1);
    nodes_2_2_rank_0_op_7:            4, NODES_2_2, "0:7",              WORKS,   [blocking],                        20, FromRank(0, 1);
    nodes_2_2_rank_0_op_9:            4, NODES_2_2, "0:9",              WORKS,   [persistent],                      20, FromRank(0, 1);
    nodes_2_2_rank_0_op_10:           4, NODES_2_2, "0:10",             WORKS,   [blocking],                        20, FromRank(0, 2);
    nodes_2_2_rank_0_op_11:           4, NODES_2_2, "0:11",             WORKS,   [nonblocking],                     20, FromRank(0, 2);
    nodes_2_2_rank_2_op_2:            4, NODES_2_2, "2:2",              WORKS,   [blocking],                        20, FromRank(2, 1);
    nodes_2_2_rank_2_op_4:            4, NODES_2_2, "2:4",              WORKS,   [blocking],                        20, FromRank(2, 1);
    nodes_2_2_rank_2_op_7:            4, NODES_2_2, "2:7",              WORKS,   [persistent],                      20, FromRank(2, 2);
    nodes_2_2_rank_3_op_1:            4, NODES_2_2, "3:1",              WORKS,   [nonblocking],                     20, FromRank(3, 1);
    nodes_2_2_rank_3_op_5:            4, NODES_2_2, "3:5",              WORKS,   [blocking],                        20, FromRank(3, 1);

    // The device refused on every rank, so the device exchange decides to
    // fall back, and rank 0's send of that verdict to one member fails.
    fallback_verdict_blocking:        3, ONE_NODE,  "0:5",              REFUSED, [blocking],                        20, VerdictResent;
    fallback_verdict_nonblocking:     3, ONE_NODE,  "0:6",              REFUSED, [nonblocking],                     20, VerdictResent;
    fallback_verdict_persistent:      3, ONE_NODE,  "0:5",              REFUSED, [persistent],                      20, VerdictResent;

    // The device refused on every rank, so every barrier runs hwbarr's
    // linear barrier; blocking, non-blocking and persistent ones in turn
    // (`mixed`); then one point-to-point operation of rank 0 (the gatherer)
    // or of rank 3 fails. Every rank gets an MPI error, at the failing
    // rank's barrier or the one after: a rank released before the failure
    // meets rank 0's notice in its next barrier, whatever its kind. (When
    // blocking barriers went to the component below, such a rank hung there
    // or got MPI_ERR_TRUNCATE.)
    after_fallback_rank_0_op_12:      4, ONE_NODE,  "0:12",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_0_op_14:      4, ONE_NODE,  "0:14",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_0_op_17:      4, ONE_NODE,  "0:17",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_0_op_20:      4, ONE_NODE,  "0:20",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_0_op_23:      4, ONE_NODE,  "0:23",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_0_op_27:      4, ONE_NODE,  "0:27",             REFUSED, [mixed],                           12, AfterFallback(0);
    after_fallback_rank_3_op_5:       4, ONE_NODE,  "3:5",              REFUSED, [mixed],                           12, AfterFallback(3);
    after_fallback_rank_3_op_6:       4, ONE_NODE,  "3:6",              REFUSED, [mixed],                           12, AfterFallback(3);
    after_fallback_rank_3_op_8:       4, ONE_NODE,  "3:8",              REFUSED, [mixed],                           12, AfterFallback(3);
    after_fallback_rank_3_op_9:       4, ONE_NODE,  "3:9",              REFUSED, [mixed],                           12, AfterFallback(3);

    // A panic of hwbarr's (`<n>p`) in place of the error, in the device
    // exchange, the layout exchange, a node's device exchange, and the
    // leaders' messages of a later barrier: contained on its rank, which
    // fails the communicator and tells the others, as for an error.
    panic_one_node_rank_0_op_2:       3, ONE_NODE,  "0:2p",             WORKS,   [blocking nonblocking persistent], 20, FromRank(0, 1);
    panic_one_node_rank_2_op_3:       3, ONE_NODE,  "2:3p",             WORKS,   [blocking],                        20, FromRank(2, 1);
    panic_nodes_2_2_rank_0_op_4:      4, NODES_2_2, "0:4p",             WORKS,   [blocking],                        20, FromRank(0, 1);
    panic_nodes_2_2_rank_2_op_4:      4, NODES_2_2, "2:4p",             WORKS,   [nonblocking],                     20, FromRank(2, 1);
    panic_nodes_2_2_rank_0_op_10:     4, NODES_2_2, "0:10p",            WORKS,   [persistent],                      20, FromRank(0, 2);

    // An application that aborts on the error ends the job (rank 2 learns
    // of the failure of rank 0's verdict only at its next barrier).
    abort_on_the_error_ends_the_job:  3, ONE_NODE,  "0:6",              WORKS,   [blocking],                        20, Aborts(0, 1);
}

/// Runs `case` with the fault-injection build, one job per kind.
fn check(name: &str, case: &Case) {
    let np = case.np;
    assert!(case.hosts.is_none() || case.device.is_none(), "{name}: a device fault is injected on one node only");
    with_component_path(fault_component_path(), || {
        for &kind in case.kinds {
            let on_error = if matches!(case.outcome, Aborts(..)) { "abort" } else { "" };
            let job = p2p_job(np, case.hosts, case.spec, kind, on_error, case.barriers, case.device);
            let what = format!(
                "{name}: HWBARR_FAULT_P2P={} device fault {:?}, {kind}, np {np} on {:?}",
                case.spec, case.device, case.hosts
            );
            match case.outcome {
                Everywhere(at) => assert_error_everywhere(&job, np, at, &what),
                FromRank(rank, at) => assert_error_reaches_all(&job, np, Some(rank), at, &what),
                VerdictResent => {
                    assert!(job.ok(), "{what}\n{}", job.dump());
                    let out = job.stdout();
                    let no_error = format!("p2pfault {kind}: no error in {} barriers", case.barriers);
                    assert_eq!(out.matches(&no_error).count(), np, "{what}\n{}", job.dump());
                    let err = job.stderr();
                    assert_eq!(
                        err.matches("fallback verdict of the device exchange to rank").count(),
                        1,
                        "{what}\n{}",
                        job.dump()
                    );
                    assert!(err.contains("no shared-memory device"), "{what}\n{}", job.dump());
                }
                AfterFallback(rank) => {
                    let out = job.stdout();
                    let at = out
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix(&format!("rank {rank}: p2pfault {kind}: error at barrier "))?
                                .split(':')
                                .next()?
                                .parse()
                                .ok()
                        })
                        .unwrap_or_else(|| panic!("{what}: the failing rank saw no error\n{}", job.dump()));
                    eprintln!("{what}: error at barrier {at}");
                    assert!(at >= 2, "{what}: the fault hit the device exchange, not the fallback\n{}", job.dump());
                    assert_error_reaches_all(&job, np, Some(rank), at, &what);
                    let err = job.stderr();
                    let dup_lines = fallback_lines(&err).into_iter().filter(|l| l.contains("(cid 3)")).count();
                    assert_eq!(dup_lines, 1, "{what}: the dup's fallback, said once\n{}", job.dump());
                }
                Aborts(rank, at) => {
                    assert!(!job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
                    let line = format!("rank {rank}: p2pfault {kind}: error at barrier {at}: class ");
                    assert!(job.stdout().contains(&line), "{what}\n{}", job.dump());
                }
            }
        }
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
    let job = p2p_job(3, None, "1", "blocking", "", 20, None);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("p2pfault blocking: no error in 20 barriers").count(), 3, "{}", job.dump());
}

/// A panic on the device's direct path (HWBARR_FAULT_PANIC, the
/// fault-injection build): rank 1's 4th blocking barrier on the direct
/// path, barrier 5 on the dup (its first is the exchange), panics before it
/// arrives. The entry point contains it and fails the communicator, whose
/// failure word releases the others: every rank gets the error at barrier
/// 5, none waits for ever, and the job ends cleanly.
#[test]
fn panic_on_the_device_direct_path() {
    for hosts in [None, NODES_2_2] {
        with_component_path(fault_component_path(), || {
            let job = fault_job(4, hosts, &[("HWBARR_FAULT_PANIC", "1:4")], "blocking", "", 20, None);
            let what = format!("HWBARR_FAULT_PANIC=1:4 on {hosts:?}");
            assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
            let out = job.stdout();
            for r in 0..4 {
                let line = format!("rank {r}: p2pfault blocking: error at barrier 5: class ");
                assert!(out.contains(&line), "{what}: rank {r}\n{}", job.dump());
                assert!(out.contains(&format!("rank {r}: p2pfault done")), "{what}\n{}", job.dump());
            }
            let err = job.stderr();
            assert!(err.contains("barrier 4 on the direct path of this rank panics"), "{what}\n{}", job.dump());
            assert!(err.contains("internal error in MPI_Barrier"), "{what}\n{}", job.dump());
        });
    }
}

/// The component built with the `fault-injection` feature (once, by cargo,
/// into `<target>/fault`), on a component path of its own.
fn fault_component_path() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let root = target_dir().parent().unwrap().join("fault");
        let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "--lib", "--features", "fault-injection"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CARGO_TARGET_DIR", &root)
            .status()
            .expect("run cargo");
        assert!(st.success(), "cargo build --features fault-injection");
        let dir = root.join("components");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(root.join("release/libmca_coll_hwbarr.so"), dir.join("mca_coll_hwbarr.so")).unwrap();
        format!("{}:{}", dir.display(), pkglib())
    })
}

/// A `p2pfault` job: `spec` is HWBARR_FAULT_P2P, `kind` the barrier kind,
/// on one node (`hosts` None, `np` ranks) or on fake nodes; on one node,
/// the device fault `device` (as in `fault_launch`) on every rank too.
fn p2p_job(
    np: usize,
    hosts: Option<&str>,
    spec: &str,
    kind: &str,
    on_error: &str,
    iters: u32,
    device: Option<&str>,
) -> Job {
    fault_job(np, hosts, &[("HWBARR_FAULT_P2P", spec)], kind, on_error, iters, device)
}

/// As `p2p_job`, with the fault variables `faults` (HWBARR_FAULT_P2P,
/// HWBARR_FAULT_PANIC).
fn fault_job(
    np: usize,
    hosts: Option<&str>,
    faults: &[(&str, &str)],
    kind: &str,
    on_error: &str,
    iters: u32,
    device: Option<&str>,
) -> Job {
    let it = iters.to_string();
    let world_er = if ompi_major() < 5 { "1" } else { "" };
    let mut env: Vec<(&str, &str)> = faults.to_vec();
    env.extend([("HWBARR_KIND", kind), ("HWBARR_ON_ERROR", on_error)]);
    if !world_er.is_empty() {
        env.push(("HWBARR_WORLD_ERRORS_RETURN", world_er));
    }
    if let Some(d) = device {
        env.push(("HWBARR_FAULT", d));
    }
    let args = ["p2pfault", it.as_str()];
    match hosts {
        None => {
            let preload = format!("LD_PRELOAD={}", fault_preload().display());
            let mut launch = vec![];
            if device.is_some() {
                launch.extend(["-x", preload.as_str()]);
            }
            for (k, _) in &env {
                launch.extend(["-x", *k]);
            }
            run(launch_cmd(np, &launch, &[("coll_hwbarr_verbose", "1")], &env, &args, 60), 60)
        }
        Some(h) => {
            let list = env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";");
            fake_nodes_env_list(h, &list, &[("coll_hwbarr_verbose", "1")], &args)
        }
    }
}

/// Every rank got an MPI error at barrier `at` (and says which class),
/// its later barriers on that communicator fail too, and the job ended
/// cleanly (every rank finalized).
fn assert_error_everywhere(job: &Job, np: usize, at: u32, what: &str) {
    assert_error_reaches_all(job, np, None, at, what)
}

/// As `assert_error_everywhere`, when only `failing` (if given) had an
/// operation fail, at barrier `at`: it gets its error there, and each
/// other rank there or, if that barrier had already released it, at its
/// next one.
fn assert_error_reaches_all(job: &Job, np: usize, failing: Option<usize>, at: u32, what: &str) {
    assert!(job.ok() && !job.timed_out(), "{what}\n{}", job.dump());
    let out = job.stdout();
    for r in 0..np {
        let want = format!("rank {r}: p2pfault ");
        let line = out.lines().find(|l| l.starts_with(&want) && l.contains("error at barrier"));
        let line = line.unwrap_or_else(|| panic!("{what}: rank {r} got no error\n{}", job.dump()));
        let ok = |b: u32| line.contains(&format!("error at barrier {b}: class "));
        let fine = match failing {
            Some(f) if f != r => ok(at) || ok(at + 1),
            _ => ok(at),
        };
        assert!(fine, "{what}: {line}\n{}", job.dump());
        assert!(
            out.contains(&format!("rank {r}: p2pfault: later barrier on the dup returns an error")),
            "{what}\n{}",
            job.dump()
        );
        assert!(out.contains(&format!("rank {r}: p2pfault done")), "{what}\n{}", job.dump());
    }
    let err = job.stderr();
    assert!(err.contains("fault injection: point-to-point operation"), "{what}\n{}", job.dump());
    if err.contains("of this rank panics") {
        assert!(err.contains("internal error in a barrier on communicator"), "{what}: no warning\n{}", job.dump());
    }
}
