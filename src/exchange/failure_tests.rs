//! Every point-to-point operation of every rank, made to fail in turn
//! (`mem::failing`), on one node and across nodes, with blocking and
//! non-blocking barriers: every rank's barriers on the communicator end
//! with an error (the failing one's where its operation failed, the others'
//! there or at their next), none hangs, and no rank completes a barrier
//! that some rank has not entered. The component's own fault-injection
//! build runs a sample of these cases under mpirun (tests/p2p_faults.rs).

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::barrier::hier::HierOp;
use crate::barrier::inter::InterAlgorithm;
use crate::barrier::{device, Op};
use crate::comm::{Comm, Options};
use crate::exchange::lookout::Lookout;
use crate::p2p::mem::{self, Mem};
use crate::p2p::P2p;
use crate::settings::Algorithm;

/// The tag of the first barrier call (`mem` has one foreign tag).
const FOREIGN: c_int = -1000;

/// Barriers each rank runs; faults are injected in the first `BARRIERS - 1`
/// so that a rank the failed barrier released still has one more to learn.
const BARRIERS: u32 = 5;

/// Polls a non-blocking step to its end, failing the communicator on error
/// (as the engine does).
fn drive<T>(c: &Comm<Mem>, mut step: impl FnMut() -> Result<Option<T>, c_int>) -> Result<T, c_int> {
    loop {
        match step() {
            Ok(Some(t)) => return Ok(t),
            Ok(None) => std::thread::yield_now(),
            Err(rc) => {
                c.fail(rc);
                return Err(rc);
            }
        }
    }
}

/// Barrier `k` on `c` as the component runs it: the first one is the
/// exchange; after it, odd barriers are non-blocking (polled), even ones
/// take the blocking path.
fn barrier(c: &Comm<Mem>, k: u32) -> Result<(), c_int> {
    if let Some(rc) = c.broken() {
        return Err(rc);
    }
    match c.route() {
        Some(route) if k.is_multiple_of(2) => crate::barrier::run(c, route),
        _ => {
            let mut op = Op::start(c, Some(FOREIGN)).inspect_err(|&rc| c.fail(rc))?;
            drive(c, || Ok(op.poll(c)?.then_some(())))
        }
    }
}

/// What one rank saw: the barrier that failed (if any), and its operation
/// count after each barrier it completed.
#[derive(Debug, Clone)]
struct Seen {
    failed_at: Option<u32>,
    ops_after: Vec<u64>,
}

/// Runs `BARRIERS` barriers on every rank of `eps`; each rank stops at its
/// first error, and then checks that the next barrier fails at once.
/// Panics if the ranks do not all finish within 20 s (a hang).
fn run(eps: Vec<Mem>, algorithm: Algorithm, inter: InterAlgorithm) -> Vec<Seen> {
    let n = eps.len();
    let multi = eps.iter().map(|e| e.host()).collect::<std::collections::HashSet<_>>().len() > 1;
    let entered = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let seen = mem::run(eps, move |ep| {
            let r = ep.rank();
            let opts = Options::for_tests(algorithm, Some(inter));
            let c = Comm::new(ep.clone(), r, n as c_int, 7, multi, opts);
            let mut seen = Seen { failed_at: None, ops_after: Vec::new() };
            for k in 1..=BARRIERS {
                entered.fetch_add(1, SeqCst);
                if barrier(&c, k).is_err() {
                    seen.failed_at = Some(k);
                    assert!(barrier(&c, k + 1).is_err(), "rank {r}: a barrier after the failed one succeeded");
                    break;
                }
                let k = k as usize;
                assert!(entered.load(SeqCst) >= n * k, "rank {r} completed barrier {k} before every rank entered it");
                seen.ops_after.push(ep.ops());
            }
            seen
        });
        let _ = tx.send(seen);
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("ranks hang after a failure")
}

/// For every rank and every operation it starts in the first
/// `BARRIERS - 1` barriers: that operation fails, and every rank gets an
/// error at the failing rank's barrier or the one after.
fn every_operation_fails_in_turn(hosts: &[&str], algorithm: Algorithm, inter: InterAlgorithm) {
    every_fault_in_turn(hosts, algorithm, inter, mem::failing)
}

/// As `every_operation_fails_in_turn`, with a panic in place of each
/// error: a bug of hwbarr's anywhere in an exchange or a protocol.
fn every_operation_panics_in_turn(hosts: &[&str], algorithm: Algorithm, inter: InterAlgorithm) {
    every_fault_in_turn(hosts, algorithm, inter, mem::panicking)
}

fn every_fault_in_turn(
    hosts: &[&str],
    algorithm: Algorithm,
    inter: InterAlgorithm,
    faulty: fn(&[&str], c_int, u64) -> Vec<Mem>,
) {
    let clean = run(mem::network(hosts), algorithm, inter);
    assert!(clean.iter().all(|s| s.failed_at.is_none()), "{hosts:?}: clean run failed: {clean:?}");
    let mut cases = 0;
    for (r, s) in clean.iter().enumerate() {
        for op in 1..=s.ops_after[BARRIERS as usize - 2] {
            let seen = run(faulty(hosts, r as c_int, op), algorithm, inter);
            let what = format!("{hosts:?} {algorithm} {inter}: rank {r}'s operation {op} fails: {seen:?}");
            let at = seen[r].failed_at.unwrap_or_else(|| panic!("{what}: the failing rank saw no error"));
            // The barrier the operation belongs to, from the clean run.
            let want = 1 + s.ops_after.iter().filter(|&&ops| ops < op).count() as u32;
            assert_eq!(at, want, "{what}: the failing rank's error came at another barrier");
            for (q, sq) in seen.iter().enumerate() {
                let e = sq.failed_at.unwrap_or_else(|| panic!("{what}: rank {q} saw no error"));
                assert!(e == at || e == at + 1, "{what}: rank {q} learnt at barrier {e}");
            }
            cases += 1;
        }
    }
    assert!(cases >= hosts.len(), "{hosts:?}: only {cases} cases");
}

#[test]
fn one_node_device() {
    every_operation_fails_in_turn(&["a", "a", "a"], Algorithm::Counter, InterAlgorithm::Counter);
    every_operation_fails_in_turn(&["a", "a"], Algorithm::Toggle, InterAlgorithm::Counter);
    every_operation_fails_in_turn(&["a", "a", "a"], Algorithm::Polled, InterAlgorithm::Counter);
}

#[test]
fn one_node_linear() {
    every_operation_fails_in_turn(&["a", "a", "a"], Algorithm::Linear, InterAlgorithm::Counter);
}

#[test]
fn two_nodes_of_two() {
    every_operation_fails_in_turn(&["a", "a", "b", "b"], Algorithm::Counter, InterAlgorithm::Counter);
    every_operation_fails_in_turn(&["a", "b", "a", "b"], Algorithm::Toggle, InterAlgorithm::Dissemination);
}

#[test]
fn uneven_nodes_and_leaders_only() {
    every_operation_fails_in_turn(&["a", "b", "b", "c"], Algorithm::Counter, InterAlgorithm::Counter);
    every_operation_fails_in_turn(&["a", "b", "c", "d"], Algorithm::Toggle, InterAlgorithm::Dissemination);
    every_operation_fails_in_turn(&["a", "b", "c"], Algorithm::Linear, InterAlgorithm::Dissemination);
}

/// Polls each of `ops` (rank `ranks[i]`'s on `comms`) in turn until all
/// ended, at most 100,000 rounds: their outcomes (None: still going). An
/// error fails the communicator, as the engine does.
fn poll_out(ops: &mut [Op<Mem>], ranks: &[usize], comms: &[Comm<Mem>]) -> Vec<Option<Result<(), c_int>>> {
    let mut out = vec![None; ops.len()];
    for _ in 0..100_000 {
        for (i, op) in ops.iter_mut().enumerate() {
            let c = &comms[ranks[i]];
            out[i] = out[i].or_else(|| match op.poll(c) {
                Ok(false) => None,
                Ok(true) => Some(Ok(())),
                Err(rc) => {
                    c.fail(rc);
                    Some(Err(rc))
                }
            });
        }
        if out.iter().all(Option::is_some) {
            break;
        }
    }
    out
}

/// The race behind the uneven case above, forced: rank 0's answer to the
/// last rank is slow (`Mem::hold`); rank 1, answered, ends its first
/// barrier (with its node's device exchange where it has a partner) and
/// fails in its second, at its first operation, telling the leaders. The
/// last rank, still waiting for rank 0's answer, finds rank 1's notice
/// first. Its first barrier must still complete, and its next one fail:
/// the failure belongs to barrier 2, and every rank entered barrier 1.
#[test]
fn a_notice_for_the_next_barrier_during_the_first_exchange() {
    for hosts in [&["a", "b", "b", "c"][..], &["a", "b", "c"]] {
        let n = hosts.len();
        let last = n - 1;
        let clean = run(mem::network(hosts), Algorithm::Counter, InterAlgorithm::Counter);
        let net = mem::failing(hosts, 1, clean[1].ops_after[0] + 1);
        net[0].hold(0, last as c_int);
        let opts = Options::for_tests(Algorithm::Counter, Some(InterAlgorithm::Counter));
        let comms: Vec<Comm<Mem>> = net.iter().enumerate().map(|(r, ep)| Comm::new(ep.clone(), r as c_int, n as c_int, 7, true, opts)).collect();
        let mut first: Vec<Op<Mem>> = comms.iter().map(|c| Op::start(c, None).unwrap()).collect();
        let mut held = first.pop().expect("ranks");
        let before: Vec<usize> = (0..last).collect();
        assert!(poll_out(&mut first, &before, &comms).iter().all(|o| *o == Some(Ok(()))), "{hosts:?}: the others' first barrier");
        // Rank 1 (and its partner on the device) in barrier 2: it fails.
        let mut second: Vec<Op<Mem>> = (1..last).map(|r| Op::start(&comms[r], None).unwrap()).collect();
        let out = poll_out(&mut second, &before[1..], &comms);
        assert!(out.iter().all(|o| matches!(o, Some(Err(_)))), "{hosts:?}: ranks 1.. fail their second barrier: {out:?}");
        for _ in 0..64 {
            assert_eq!(held.poll(&comms[last]), Ok(false), "{hosts:?}: rank {last}, its answer held, fails early");
        }
        net[0].release();
        let ended = poll_out(std::slice::from_mut(&mut held), &[last], &comms);
        assert_eq!(ended, [Some(Ok(()))], "{hosts:?}: rank {last}'s first barrier");
        assert!(comms[last].broken().is_some(), "{hosts:?}: rank {last} failed once its first barrier was over");
        assert!(barrier(&comms[last], 2).is_err(), "{hosts:?}: rank {last}'s next barrier fails");
        let mut zero = [Op::start(&comms[0], None).unwrap()];
        assert!(matches!(poll_out(&mut zero, &[0], &comms)[0], Some(Err(_))), "{hosts:?}: rank 0's next barrier fails");
    }
}

/// Six leaders under dissemination: each knows only its partners (not the
/// leader 3 nodes away), so a failure reaches the others through them.
#[test]
fn six_leaders_each_knowing_its_partners() {
    every_operation_fails_in_turn(&["a", "b", "c", "d", "e", "f"], Algorithm::Counter, InterAlgorithm::Dissemination);
}

/// A panic of hwbarr's in any operation, on one node and across nodes, in
/// the first exchange and in the protocols after it, blocking and not:
/// contained on its rank (`Comm::contained`), which fails the communicator
/// and tells its peers, so that no rank hangs.
#[test]
fn a_panic_anywhere_fails_the_barrier_everywhere() {
    every_operation_panics_in_turn(&["a", "a", "a"], Algorithm::Counter, InterAlgorithm::Counter);
    every_operation_panics_in_turn(&["a", "a", "a"], Algorithm::Linear, InterAlgorithm::Counter);
    every_operation_panics_in_turn(&["a", "a", "b", "b"], Algorithm::Line, InterAlgorithm::Counter);
    every_operation_panics_in_turn(&["a", "b", "c"], Algorithm::Toggle, InterAlgorithm::Dissemination);
    every_operation_panics_in_turn(&["a", "a", "a", "b"], Algorithm::Polled, InterAlgorithm::Counter);
}

/// A panic while sending a failure notice (a second bug, on a rank already
/// failing) costs that notice only. hwbarr's linear barrier on 4 ranks:
/// rank 1's operations fail in turn; rank 0, the gatherer, learns and
/// tells ranks 1, 2 and 3, its first notice (to rank 1, which knows
/// already) panicking. Ranks 2 and 3 must still get theirs, or they hang.
#[test]
fn a_panic_in_a_failure_notice_spares_the_other_notices() {
    let hosts = ["a"; 4];
    let clean = run(mem::network(&hosts), Algorithm::Linear, InterAlgorithm::Counter);
    let ops = clean[1].ops_after[BARRIERS as usize - 2];
    assert!(ops >= 4, "rank 1 ran only {ops} operations");
    for op in 1..=ops {
        let eps = mem::failing(&hosts, 1, op);
        eps[0].panic_at_next_notice();
        let seen = run(eps, Algorithm::Linear, InterAlgorithm::Counter);
        for (q, s) in seen.iter().enumerate() {
            assert!(s.failed_at.is_some(), "rank 1's operation {op} fails: rank {q} saw no error: {seen:?}");
        }
    }
}

/// hwbarr not selected on rank `t` (its first barrier is the component
/// below's MPI_Ibarrier: it sends libnbc's first message to the next rank
/// and never speaks hwbarr's exchange). Every other rank's first barrier
/// must fail, not hang, wherever `t` sits, on one node and across nodes.
fn a_rank_of_another_barrier(hosts: &'static [&'static str]) {
    let n = hosts.len();
    for t in 0..n {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let out = mem::run(mem::network(hosts), move |ep| {
                let r = ep.rank();
                if r as usize == t {
                    ep.send_foreign(((t + 1) % n) as c_int);
                    return None;
                }
                let opts = Options::for_tests(Algorithm::Counter, None);
                let multi = hosts.iter().any(|h| *h != hosts[0]);
                let c = Comm::new(ep, r, n as c_int, 7, multi, opts);
                Some(barrier(&c, 1).is_err())
            });
            let _ = tx.send(out);
        });
        let out = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{hosts:?}: hang with rank {t}"));
        for (r, failed) in out.iter().enumerate() {
            assert!(r == t || *failed == Some(true), "{hosts:?}, rank {t} elsewhere: rank {r} {failed:?}");
        }
    }
}

#[test]
fn a_rank_of_another_barrier_fails_the_first_exchange_everywhere() {
    a_rank_of_another_barrier(&["a", "a"]);
    a_rank_of_another_barrier(&["a", "a", "a", "a"]);
    a_rank_of_another_barrier(&["a", "a", "b", "b"]);
    a_rank_of_another_barrier(&["a", "b", "c"]);
}

/// Polls while this rank keeps starting operations: false after 20,000
/// polls without a new one.
struct Stalled {
    ops: u64,
    polls: u32,
}

impl Stalled {
    fn new(ep: &Mem) -> Stalled {
        Stalled { ops: ep.ops(), polls: 0 }
    }
    fn more(&mut self, ep: &Mem) -> bool {
        std::thread::yield_now();
        if ep.ops() != self.ops {
            (self.ops, self.polls) = (ep.ops(), 0);
        }
        self.polls += 1;
        self.polls < 20_000
    }
}

/// One rank of `dropped_at_each_step`: starts the first exchange, polls it
/// until this rank has made `stop` operations (or it ends, or it stalls on
/// ranks that stopped), then drops it and the communicator state.
fn drop_mid_exchange(ep: Mem, n: usize, multi: bool, algorithm: Algorithm, stop: u64) {
    let r = ep.rank();
    let opts = Options::for_tests(algorithm, Some(InterAlgorithm::Counter));
    let c = Comm::new(ep.clone(), r, n as c_int, 7, multi, opts);
    let mut idle = Stalled::new(&ep);
    let mut done = false;
    if multi {
        if let Ok(mut op) = HierOp::first(&c, Lookout::new(Some(FOREIGN), None)) {
            while !done && ep.ops() < stop && idle.more(&ep) {
                done = !matches!(op.poll(&c), Ok(false));
            }
        }
    } else if let Ok(mut x) = device::first(&c, Lookout::new(Some(FOREIGN), None)) {
        while !done && ep.ops() < stop && idle.more(&ep) {
            done = !matches!(x.poll(), Ok(None));
        }
    }
    // The exchange was dropped at the end of its block; now the state.
    drop(c);
}

/// The communicator destroyed under its first exchange (what MPI_Finalize
/// does to a freed communicator whose barrier never completed, the one way
/// hwbarr's state can go while an exchange is in flight: each request
/// holds its communicator otherwise): after each operation `k` of the
/// clean exchange, every rank stops polling (after operation k, or its own
/// last one) and drops the exchange and its communicator state mid-flight
/// (segment, posted operations, lookout). Nothing panics or hangs. (The
/// in-memory network has no context ids, so a later communicator on it
/// would meet the dropped one's messages; in Open MPI a new communicator
/// has its own.)
fn dropped_at_each_step(hosts: &'static [&'static str], algorithm: Algorithm) {
    let n = hosts.len();
    let multi = hosts.iter().any(|h| *h != hosts[0]);
    let clean = run(mem::network(hosts), algorithm, InterAlgorithm::Counter);
    let totals: Vec<u64> = clean.iter().map(|s| s.ops_after[0]).collect();
    let steps = *totals.iter().max().expect("ranks");
    for k in 0..=steps {
        let (tx, rx) = mpsc::channel();
        let totals = totals.clone();
        std::thread::spawn(move || {
            // A rank's panic is reported as one, not as a hang.
            let out = std::panic::catch_unwind(move || {
                mem::run(mem::network(hosts), move |ep| {
                    let stop = k.min(totals[ep.rank() as usize]);
                    drop_mid_exchange(ep, n, multi, algorithm, stop)
                })
            });
            let _ = tx.send(out.is_ok());
        });
        let ok = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{hosts:?}: hang after step {k}"));
        assert!(ok, "{hosts:?} {algorithm}: a rank panicked when dropped after step {k}");
    }
}

#[test]
fn a_communicator_destroyed_under_its_first_exchange() {
    dropped_at_each_step(&["a", "a", "a"], Algorithm::Counter);
    dropped_at_each_step(&["a", "a"], Algorithm::Linear);
    dropped_at_each_step(&["a", "a", "b", "b"], Algorithm::Toggle);
}
