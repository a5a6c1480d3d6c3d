//! The route of a one-node communicator: its ranks meet on the node's
//! shared-memory device (`shm::segment`), with one of its cores (`core`):
//! the toggle-wire barrier, the DMA-counter barrier, the toggle wires on
//! one line, or on a line each read by domain leaders. A node's local phases across nodes (`hier`) use the same entry
//! and release.

use std::ffi::c_int;

use crate::comm::{Comm, Core, LinePolls};
use crate::core::{counter, line, polled, toggle};
use crate::exchange::device::DeviceExchange;
use crate::exchange::lookout::Lookout;
use crate::express::Packed;
use crate::p2p::{P2p, ERROR};
use crate::ompi::report;
use crate::shm::futex::Kernel;
use crate::shm::line_pick::Announcement;
use crate::shm::segment::Segment;
use crate::shm::sleep;
use crate::wait::{self, WaitPolicy};

/// Sleeps on the device's words last at most a slice of the wait.
const FUTEX: Kernel = Kernel { timeout: wait::SLEEP_SLICE };

/// Where a rank stands in the barrier it entered on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticket {
    Toggle(toggle::Target),
    Counter,
    /// The count and the candidate line it was entered on.
    Line(line::Count, u8),
    Polled(polled::Count),
}

/// A ticket in the express lane's word (`express`): the kind in bits 32-33,
/// the count or target below (a line's count in bits 0-7, its line in 8-15).
impl Packed for Ticket {
    fn pack(self) -> u64 {
        match self {
            Ticket::Line(c, slot) => u64::from(c.0) | u64::from(slot) << 8,
            Ticket::Counter => 1 << 32,
            Ticket::Toggle(t) => (2 << 32) | u64::from(t.0),
            Ticket::Polled(t) => (3 << 32) | u64::from(t.0),
        }
    }
    fn unpack(bits: u64) -> Ticket {
        match bits >> 32 {
            0 => Ticket::Line(line::Count(bits as u8), (bits >> 8) as u8),
            1 => Ticket::Counter,
            2 => Ticket::Toggle(toggle::Target(bits as u32)),
            _ => Ticket::Polled(polled::Count(bits as u32)),
        }
    }
}

/// One node, first barrier: starts the device exchange among every rank.
pub fn first<P: P2p>(c: &Comm<P>, lookout: Lookout) -> Result<DeviceExchange<P>, c_int> {
    let t = c.layout().expect("one-node layout");
    let asked = (c.settings(), c.asks_auto());
    let trial = c.line_trial(t.local.len());
    DeviceExchange::start(c.p2p().clone(), &t.local, t.me, asked, c.place(t.me), Some(lookout), trial)
}

/// The blocking barrier on a ready device: enter and wait.
///
/// Short from one release to the next arrival, the path that lies on a
/// barrier's critical path for every rank: the line barrier's arrival and
/// the wait's first polls and rounds (`wait::after_arrival`) are inlined
/// here, before the general loop (`wait`) with its closures and progress
/// turns (docs/benchmarks.md, "The blocking barrier's own path" and
/// "Oversubscribed: the first rounds inlined").
#[inline(always)]
pub fn barrier<P: P2p>(c: &Comm<P>, core: Core) -> Result<(), c_int> {
    let t = enter(c, core);
    wait::after_arrival(policy(c), c.crowd(), || released(c, t), |made| wait(c, t, made))
}

/// The blocking barrier on the line core, MPI_Barrier's path where it
/// matters most: at 2 ranks each with its core, where a barrier is one
/// cache line passed back and forth and every instruction from one
/// barrier's release to the next arrival lies on its critical path, on
/// both ranks. The line barrier's period climbs steeply with that gap
/// (docs/benchmarks.md, "MPI_Barrier's line path: nothing between a
/// release and the next arrival"), so this is that path and nothing else:
/// the arrival, then `line.polls` polls (`Comm::line_polls` or
/// `Comm::crowd_line_polls`: as many as the first round of
/// `wait::after_arrival`), each followed by `line.pauses` PAUSEs (`pause`:
/// a waiter that looks again at once takes the line from a peer on its way
/// back with its next arrival), where that round makes one.
///
/// `None`: no device or layout yet, nothing done. `Some(Ok(()))`: released
/// within the first polls. `Some(Err(t))`: entered, not released yet; the
/// caller goes on with `line_rest`. No `expect` and no index that can
/// fail: MPI_Barrier runs it outside its panic containment.
#[inline(always)]
pub fn line_barrier<P: P2p>(c: &Comm<P>, line: LinePolls) -> Option<Result<(), Ticket>> {
    let (seg, count) = line_arrival(c)?;
    let wires = seg.line_wires();
    for _ in 0..line.polls {
        if line::is_released(wires, count) {
            #[cfg(feature = "pairs")]
            line::pairs::count(wires, count);
            sleep::line_wake(&FUTEX, wires, seg.doorbell());
            return Some(Ok(()));
        }
        for _ in 0..line.pauses {
            std::hint::spin_loop();
        }
    }
    // Still the line it arrived on: only an arrival moves it.
    Some(Err(Ticket::Line(count, seg.line_slot())))
}

/// The line barrier's arrival alone, for a start (MPI_Start's line path,
/// `Server::line_start`): `enter` without an `expect`; None, with nothing
/// done, if the device or the layout is not there.
#[inline(always)]
pub fn line_enter<P: P2p>(c: &Comm<P>) -> Option<Ticket> {
    line_arrival(c).map(|(seg, count)| Ticket::Line(count, seg.line_slot()))
}

/// `line_enter` with the segment it arrived on, for the polls after it.
#[inline(always)]
fn line_arrival<P: P2p>(c: &Comm<P>) -> Option<(&Segment, line::Count)> {
    let (seg, t) = (c.segment()?, c.layout()?);
    let mut wires = seg.line_wires();
    if t.me >= wires.len() {
        return None;
    }
    // After the look above: a rank that steps the trial arrives too.
    if step_line_trial(c, seg) {
        wires = seg.line_wires();
    }
    Some((seg, line::arrive(wires, t.me, seg.line_mine())))
}

/// Before every arrival on the line core: steps the trial of the candidate
/// lines if one runs (one look once it is over). True if it stepped: the
/// line may have moved.
#[inline(always)]
fn step_line_trial<P: P2p>(c: &Comm<P>, seg: &Segment) -> bool {
    let running = seg.line_trial_running();
    if running {
        line_trial_step(c, seg);
    }
    running
}

/// Before an arrival while the trial of the candidate lines runs
/// (`shm::line_pick`): the step, out of the arrival's way; at its end rank 0
/// says at verbosity 1 what it picked. A pick that names no candidate
/// marks the device failed: this rank then runs on another line than its
/// peers, and each of them learns in its wait. Nothing here can panic
/// (MPI_Barrier's line path calls it).
#[cold]
#[inline(never)]
fn line_trial_step<P: P2p>(c: &Comm<P>, seg: &Segment) {
    match seg.line_step() {
        Ok(false) => {}
        Ok(true) => c.line_trial_over(seg),
        Err(Announcement(p)) => {
            report::verbose(0, &c.describe(&format!(
                "the line barrier's trial read rank 0's announcement as {p}, not a candidate line, so \
                 barriers fail"
            )));
            seg.set_failed();
        }
    }
}

/// The rest of a barrier that `line_barrier` entered and did not see
/// released in its first polls: the wait `barrier` goes on with after them
/// (`wait::after_first_round`).
pub fn line_rest<P: P2p>(c: &Comm<P>, t: Ticket) -> Result<(), c_int> {
    wait::after_first_round(policy(c), c.crowd(), || released(c, t), |made| wait(c, t, made))
}

/// Enters a barrier on the device (`arrive`), with the line barrier's
/// arrival, one store, inlined: the way from one barrier's release to the
/// next arrival, blocking or started (docs/benchmarks.md, "The blocking
/// barrier's own path").
#[inline(always)]
pub fn enter<P: P2p>(c: &Comm<P>, core: Core) -> Ticket {
    match core {
        Core::Line => {
            let seg = c.segment().expect("device set up");
            line_arrive(c, seg, c.layout().expect("layout known before the device").me)
        }
        _ => arrive(c, core),
    }
}

/// The line barrier's arrival as rank `me` (`arrive`): a store to the
/// shared line.
#[inline(always)]
fn line_arrive<P: P2p>(c: &Comm<P>, seg: &Segment, me: usize) -> Ticket {
    step_line_trial(c, seg);
    Ticket::Line(line::arrive(seg.line_wires(), me, seg.line_mine()), seg.line_slot())
}

/// Enters a barrier on the device, waking the sleepers our arrival
/// released (`shm::sleep`: no lost wake-up, and no system call when
/// nobody sleeps; on the line, whoever sees the barrier complete wakes
/// them, in `released`).
pub fn arrive<P: P2p>(c: &Comm<P>, core: Core) -> Ticket {
    let seg = c.segment().expect("device set up");
    let t = c.layout().expect("layout known before the device");
    let me = t.me;
    match core {
        Core::Counter => {
            let (cells, asleep) = (seg.counters(), seg.asleep());
            counter::arrive_with(cells, me, |q| sleep::counter_wake(&FUTEX, &cells[q], &asleep[q]));
            Ticket::Counter
        }
        Core::Toggle => {
            let w = seg.wires();
            let (target, fired) = toggle::arrive(seg.shape(), &w, me);
            if fired {
                sleep::toggle_wake(&FUTEX, &w, seg.sleepers());
            }
            Ticket::Toggle(target)
        }
        Core::Line => line_arrive(c, seg, me),
        Core::Polled => {
            let (target, p) = polled::arrive(seg.tree(), &seg.polled_wires(), me);
            woken(seg, p);
            Ticket::Polled(target)
        }
    }
}

/// A look at the polled barrier's wires as rank `me` (`polled::poll`),
/// waking the sleepers if it released them.
fn look(seg: &Segment, me: usize, target: polled::Count) -> polled::Progress {
    let p = polled::poll(seg.tree(), &seg.polled_wires(), me, target);
    woken(seg, p);
    p
}

/// After an arrival or look that fired the polled barrier: wake its sleepers.
fn woken(seg: &Segment, p: polled::Progress) {
    if p == polled::Progress::Fired {
        sleep::polled_wake(&FUTEX, &seg.polled_wires(), seg.sleepers());
    }
}

/// Whether `t` is released; an error (and the communicator failed) if it
/// is not and some rank marked the device failed: that rank may never
/// arrive. For a blocking wait (`wait`), whose leaders keep looking.
#[inline]
pub fn released<P: P2p>(c: &Comm<P>, t: Ticket) -> Result<bool, c_int> {
    let seg = c.segment().expect("device set up");
    let done = match t {
        Ticket::Counter => counter::is_released(seg.counters(), c.layout().expect("layout").me),
        Ticket::Toggle(target) => toggle::is_released(&seg.wires(), target),
        Ticket::Polled(target) => over(look(seg, c.layout().expect("layout").me, target)),
        Ticket::Line(count, slot) => {
            let wires = seg.line_candidate(usize::from(slot));
            let done = line::is_released(wires, count);
            if done {
                // No single rank releases a line barrier: each that sees
                // it complete rings for the sleepers it finds.
                sleep::line_wake(&FUTEX, wires, seg.doorbell());
            }
            done
        }
    };
    unless_failed(c, seg, done)
}

/// Whether `t` is released, tested by a barrier in flight (MPI_Ibarrier,
/// the persistent barrier, a node's local phase of a spanning one), whose
/// ranks may not call MPI while it is: as `released`, and on the polled
/// device a rank whose barrier stays in flight reads for its leaders now
/// and then (`polled::help`, paced by `wait::HelpPace`), so that a barrier
/// every rank entered completes for the ranks that test it, as the other
/// cores' do (their last arrival releases). Across nodes the leaders' phase
/// still needs each node's leader in MPI, whatever the core.
pub fn tested<P: P2p>(c: &Comm<P>, t: Ticket) -> Result<bool, c_int> {
    let Ticket::Polled(target) = t else { return released(c, t) };
    let seg = c.segment().expect("device set up");
    let mut done = over(look(seg, c.layout().expect("layout").me, target));
    if !done && seg.help_pace().due(target.0, crate::wait::now_ns) {
        let p = polled::help(seg.tree(), &seg.polled_wires(), target);
        seg.help_pace().helped(crate::wait::now_ns());
        woken(seg, p);
        done = over(p);
    }
    unless_failed(c, seg, done)
}

/// Is a polled barrier over after a look that gave `p`?
fn over(p: polled::Progress) -> bool {
    matches!(p, polled::Progress::Released | polled::Progress::Fired)
}

/// `Ok(done)`, unless the barrier is not done and some rank marked the
/// device failed: then the communicator fails.
fn unless_failed<P: P2p>(c: &Comm<P>, seg: &Segment, done: bool) -> Result<bool, c_int> {
    if !done && seg.failed() {
        // A revocation's error, which `fail` hands on as a revocation.
        c.fail(seg.revoked().unwrap_or(ERROR));
        return Err(c.broken().unwrap_or(ERROR));
    }
    Ok(done)
}

/// The policy a wait on the device follows: the communicator's, with no
/// progress turns in the first rounds of a waiter that gives its core up
/// (`WaitPolicy::on_device`). A crowd's policy (MPI_THREAD_MULTIPLE) keeps
/// its turns: a crowd exists only where ranks keep their cores, and its
/// threads take turns on them.
fn policy<P: P2p>(c: &Comm<P>) -> WaitPolicy {
    c.policy().on_device()
}

/// Waits by the device's policy (`policy`) until `t` is released (or the
/// device failed), after the `made` rounds of `wait::after_arrival`.
pub fn wait<P: P2p>(c: &Comm<P>, t: Ticket, made: u32) -> Result<(), c_int> {
    let seg: &Segment = c.segment().expect("device set up");
    let me = c.layout().expect("layout").me;
    let sleep = || match t {
        Ticket::Counter => sleep::counter_sleep(&FUTEX, &seg.counters()[me], &seg.asleep()[me]),
        Ticket::Toggle(target) => sleep::toggle_sleep(&FUTEX, &seg.wires(), seg.sleepers(), target),
        Ticket::Line(count, slot) => {
            sleep::line_sleep(&FUTEX, seg.line_candidate(usize::from(slot)), me, count, seg.doorbell())
        }
        // A rank that is ready waits for the input only and may sleep on
        // it; a leader still reading its ranks' wires must keep reading
        // (nobody would wake it), so it yields instead.
        Ticket::Polled(target) => match look(seg, me, target) {
            polled::Progress::Reading => std::thread::yield_now(),
            polled::Progress::Waiting => sleep::polled_sleep(&FUTEX, &seg.polled_wires(), seg.sleepers(), target),
            polled::Progress::Fired | polled::Progress::Released => {}
        },
    };
    let done = || released(c, t);
    let waited = match c.crowd() {
        None => wait::try_wait_after(policy(c), made, done, || c.p2p().progress(), sleep),
        Some(crowd) => {
            debug_assert_eq!(made, 0, "a crowd makes no bare rounds");
            wait::try_wait_crowded(policy(c), crowd, done, || c.p2p().progress(), sleep)
        }
    };
    crate::comm::tell_if_shared();
    waited
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait on the device turns no progress in its first rounds when
    /// the rank gives its core up, and keeps the communicator's policy
    /// otherwise.
    #[test]
    fn device_waits_start_quiet_only_on_a_shared_core() {
        use crate::comm::Options;
        use crate::p2p::mem;
        use crate::settings::{Algorithm, Idle};
        let out = mem::run(mem::network(&["a", "a"]), move |ep| {
            let r = ep.rank();
            let shared = Options::for_tests(Algorithm::Line, None);
            let own = Options { policy: WaitPolicy::for_node(2, 2, false, -1, None), ..Options::for_tests(Algorithm::Line, None) };
            assert_eq!(shared.policy.idle, Idle::Yield);
            let quiet = |o| policy(&Comm::new(ep.clone(), r, 2, 3, false, o)).quiet;
            (quiet(shared), quiet(own))
        });
        assert!(out.iter().all(|&q| q == (wait::YIELDS_BEFORE_SLEEP, 0)), "{out:?}");
    }

    /// A late test of a ticket (the express lane may test one whose
    /// barrier is over) must not release a later barrier: rank 0 tests its
    /// ticket of barrier 1 while rank 1 waits in barrier 3, which rank 0
    /// never entered. (With one-bit targets the polled barrier's test
    /// fired barrier 3 here.)
    #[test]
    fn a_late_test_releases_nothing() {
        use crate::comm::{Options, Route};
        use crate::p2p::mem;
        use crate::settings::Algorithm;
        use std::sync::{Arc, Barrier};
        for algorithm in [Algorithm::Polled, Algorithm::Toggle, Algorithm::Counter, Algorithm::Line] {
            let core = Core::of(algorithm).unwrap();
            let sync = Arc::new(Barrier::new(2));
            let out = mem::run(mem::network(&["a", "a"]), move |ep| {
                let r = ep.rank();
                let c = Comm::new(ep, r, 2, 3, false, Options::for_tests(algorithm, None));
                let mut op = crate::barrier::Op::start(&c, None).unwrap();
                while !op.poll(&c).unwrap() {
                    std::thread::yield_now();
                }
                assert_eq!(c.route(), Some(Route::Device(core)));
                let first = arrive(&c, core);
                wait(&c, first, 0).unwrap();
                barrier(&c, core).unwrap();
                sync.wait();
                if r == 1 {
                    let third = arrive(&c, core);
                    sync.wait();
                    sync.wait();
                    released(&c, third).unwrap()
                } else {
                    sync.wait();
                    // The toggle and line cores' tickets repeat every other
                    // barrier (the express lane's generation tells them
                    // apart); the polled barrier's count says it is over.
                    let over = released(&c, first).unwrap();
                    assert!(over || core != Core::Polled, "a polled ticket of a barrier over reads released");
                    sync.wait();
                    false
                }
            });
            assert!(!out[1], "{algorithm}: rank 1 left barrier 3, which rank 0 never entered");
        }
    }

    /// A polled barrier whose root entered and then computes completes for
    /// the rank that tests it (help), but never at its first test, nor in
    /// the first 8 tests of a communicator's first barrier (a tight loop
    /// reads the clock only from the 8th): twice in a row, so that the
    /// pace starts afresh with each barrier.
    #[test]
    fn a_tested_barrier_is_helped_only_after_its_first_tests() {
        use crate::comm::Options;
        use crate::p2p::mem;
        use crate::settings::Algorithm;
        use std::sync::{Arc, Barrier};
        let sync = Arc::new(Barrier::new(2));
        mem::run(mem::network(&["a", "a"]), move |ep| {
            let r = ep.rank();
            let c = Comm::new(ep, r, 2, 3, false, Options::for_tests(Algorithm::Polled, None));
            let mut op = crate::barrier::Op::start(&c, None).unwrap();
            while !op.poll(&c).unwrap() {
                std::thread::yield_now();
            }
            let mut bad = Vec::new();
            for round in 0..2 {
                if r == 0 {
                    let t = arrive(&c, Core::Polled);
                    sync.wait(); // arrived; now "computes"
                    sync.wait(); // rank 1 is through
                    assert!(released(&c, t).unwrap());
                } else {
                    sync.wait();
                    let t = arrive(&c, Core::Polled);
                    let Ticket::Polled(target) = t else { unreachable!() };
                    let early = if round == 0 { 8 } else { 1 };
                    let at = (1..=early).find(|_| tested(&c, t).unwrap());
                    let since = std::time::Instant::now();
                    let mut helped = at.is_some();
                    while !helped && since.elapsed().as_secs() < 2 {
                        helped = tested(&c, t).unwrap();
                    }
                    if !helped {
                        // Release rank 0 before judging, so that a failure
                        // fails rather than hangs.
                        let seg = c.segment().unwrap();
                        polled::help(seg.tree(), &seg.polled_wires(), target);
                    }
                    sync.wait();
                    if let Some(k) = at {
                        bad.push(format!("barrier {round}: helped at test {k}"));
                    }
                    if !helped {
                        bad.push(format!("barrier {round}: not helped within 2 s"));
                    }
                }
            }
            assert!(bad.is_empty(), "{bad:?}");
        });
    }

    /// MPI_Barrier's line path (`line_barrier`, then `line_rest` for a
    /// barrier its first polls did not see released): taken on the line
    /// core where ranks keep their cores (`Comm::line_polls`), also where
    /// their threads may crowd (the rest then waits in the crowded loop),
    /// not where they give them up; no rank leaves barrier k before every
    /// rank entered it, over the counts' wrap, with the communicator's
    /// first polls and with one; each rank is late now and then, so that
    /// both endings occur.
    #[test]
    fn the_line_path_never_leaves_early_and_ends_both_ways() {
        use crate::comm::{Options, Route};
        use crate::p2p::mem;
        use crate::settings::{Algorithm, Idle};
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        const BARRIERS: usize = 300;
        let own = Options::for_tests(Algorithm::Line, None).policy;
        let shared = WaitPolicy { spins: 1, progress: true, idle: Idle::Yield, quiet: 0, adapts: false };
        let crowd = Some(wait::Crowd { above: 1, policy: shared });
        for (p, few, crowd) in [(own, false, None), (own, true, None), (shared, false, None), (own, false, crowd)] {
            // The crowded loop counts its waiters process-wide.
            let _only = crowd.map(|_| wait::crowd_test_lock());
            for n in [2usize, 3] {
                let entered = Arc::new(AtomicUsize::new(0));
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(mem::run(mem::network(&vec!["a"; n]), move |ep| {
                        let r = ep.rank();
                        let opts = Options { policy: p, crowd, ..Options::for_tests(Algorithm::Line, None) };
                        let c = Comm::new(ep, r, n as c_int, 3, false, opts);
                        let mut op = crate::barrier::Op::start(&c, None).unwrap();
                        while !op.poll(&c).unwrap() {
                            std::thread::yield_now();
                        }
                        assert_eq!(c.route(), Some(Route::Device(Core::Line)));
                        let line = match crowd {
                            None => c.line_polls()?,
                            Some(_) => {
                                assert_eq!(c.line_polls(), None, "threads that may crowd check first");
                                c.crowd_line_polls()?
                            }
                        };
                        let line = if few { LinePolls { polls: 1, pauses: 1 } } else { line };
                        let (mut fast, mut rest, mut early) = (0, 0, Vec::new());
                        for k in 0..BARRIERS {
                            if (k + r as usize).is_multiple_of(7) {
                                std::thread::sleep(std::time::Duration::from_micros(200));
                            }
                            entered.fetch_add(1, SeqCst);
                            match line_barrier(&c, line).expect("a device") {
                                Ok(()) => fast += 1,
                                Err(t) => {
                                    line_rest(&c, t).unwrap();
                                    rest += 1;
                                }
                            }
                            // Noted, not asserted here: the other ranks would
                            // wait for this one for ever.
                            let e = entered.load(SeqCst);
                            if e < n * (k + 1) {
                                early.push((k, e));
                            }
                        }
                        Some((line.polls, fast, rest, early))
                    }));
                });
                // A rank that left early may strand the others: a hang fails too.
                let what = format!(
                    "spins {}, {n} ranks{}{}",
                    p.spins,
                    if few { ", one poll" } else { "" },
                    if crowd.is_some() { ", threads may crowd" } else { "" }
                );
                let out = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap_or_else(|_| panic!("{what}: hung"));
                for (r, seen) in out.into_iter().enumerate() {
                    let Some((polls, fast, rest, early)) = seen else {
                        assert_eq!(p.spins, 1, "{what}: rank {r} does not take the line path");
                        continue;
                    };
                    assert!(p.spins > 1, "{what}: rank {r} takes the line path on a shared core");
                    assert_eq!(polls, if few { 1 } else { wait::first_round(p.on_device(), None) });
                    assert!(early.is_empty(), "{what}: rank {r} left early {} times, first (barrier, entries seen) {:?}", early.len(), &early[..early.len().min(4)]);
                    assert_eq!(fast + rest, BARRIERS);
                    assert!(rest > 0, "{what}: rank {r} never waited past its first polls");
                    assert!(n > 2 || fast > 0, "{what}: rank {r} never released within its first polls");
                }
            }
        }
    }

    /// Rank `ep.rank()` of `n` on the line core, its ranks keeping their
    /// cores (the trial's condition) and trying 4 candidate lines, its
    /// first barrier (the device exchange) over.
    fn trial_comm(ep: crate::p2p::mem::Mem, n: usize) -> Comm<crate::p2p::mem::Mem> {
        use crate::comm::Options;
        use crate::settings::{Algorithm, Idle};
        let base = Options::for_tests(Algorithm::Line, None);
        let policy = WaitPolicy { idle: Idle::Spin, ..base.policy };
        let opts = Options { line_candidates: 4, policy, ..base };
        let r = ep.rank();
        let c = Comm::new(ep, r, n as c_int, 3, false, opts);
        let mut op = crate::barrier::Op::start(&c, None).unwrap();
        while !op.poll(&c).unwrap() {
            std::thread::yield_now();
        }
        c
    }

    /// The line trial over a communicator's first barriers, whatever
    /// path each takes: MPI_Barrier's line path and its rest, the
    /// contained entry and wait, and a start's arrival tested
    /// until released (MPI_Start, MPI_Ibarrier), all ranks the same kind in
    /// each barrier, each rank late now and then. No rank leaves a barrier
    /// before every rank entered it, before, through or after the trial;
    /// every rank ends on the line rank 0 picked, which rank 0's trial
    /// timed.
    #[test]
    fn the_line_trial_runs_through_every_path_of_a_barrier() {
        use crate::comm::Route;
        use crate::p2p::mem;
        use crate::shm::line_pick::LineTrial;
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        let barriers = LineTrial::barriers(4) as usize + 100;
        for n in [2usize, 3] {
            let entered = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(mem::run(mem::network(&vec!["a"; n]), move |ep| {
                    let r = ep.rank();
                    let c = trial_comm(ep, n);
                    assert_eq!(c.route(), Some(Route::Device(Core::Line)));
                    assert_eq!(c.segment().unwrap().line_trial_slots(), Some(4), "rank {r}");
                    let line = c.line_polls().expect("the line path");
                    let mut early = Vec::new();
                    for k in 0..barriers {
                        if (k + r as usize).is_multiple_of(11) {
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                        entered.fetch_add(1, SeqCst);
                        match k % 3 {
                            0 => {
                                if let Err(t) = line_barrier(&c, line).expect("a device") {
                                    line_rest(&c, t).unwrap();
                                }
                            }
                            1 => {
                                let t = enter(&c, Core::Line);
                                wait(&c, t, 0).unwrap();
                            }
                            _ => {
                                let t = line_enter(&c).expect("a device");
                                while !tested(&c, t).unwrap() {
                                    std::thread::yield_now();
                                }
                            }
                        }
                        let e = entered.load(SeqCst);
                        if e < n * (k + 1) {
                            early.push((k, e));
                        }
                    }
                    let seg = c.segment().unwrap();
                    (early, seg.line_in_use(), seg.line_trial_slots())
                }));
            });
            let out = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| panic!("{n} ranks: hung"));
            let picked = out[0].1 .0;
            for (r, (early, (slot, tried), running)) in out.iter().enumerate() {
                assert!(early.is_empty(), "{n} ranks: rank {r} left early: {:?}", &early[..early.len().min(4)]);
                assert_eq!((*slot, *running), (picked, None), "{n} ranks: rank {r}");
                assert_eq!(tried.is_some(), r == 0, "{n} ranks: rank {r}");
            }
            // Every line's blocks were timed, the first's included.
            let (slots, ns, first) = out[0].1 .1.unwrap();
            assert!(slots == 4 && ns > 0.0 && first < 1e9, "{n} ranks: {:?}", out[0].1);
        }
    }

    /// A rank that reads an announcement naming no candidate (here rank
    /// 1, after rank 0 read a valid one and moved to its line) marks the
    /// device failed: both ranks' next barrier ends in an error, neither
    /// hangs on a line the other left.
    #[test]
    fn a_bad_announcement_fails_every_ranks_barrier() {
        use crate::p2p::mem;
        use crate::shm::line_pick::LineTrial;
        use std::sync::atomic::Ordering::SeqCst;
        use std::sync::{Arc, Barrier};
        let sync = Arc::new(Barrier::new(2));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(mem::run(mem::network(&["a"; 2]), move |ep| {
                let r = ep.rank();
                let c = trial_comm(ep, 2);
                let line = c.line_polls().expect("the line path");
                let barrier = || match line_barrier(&c, line).expect("a device") {
                    Ok(()) => Ok(()),
                    Err(t) => line_rest(&c, t),
                };
                for _ in 0..LineTrial::barriers(4) {
                    barrier().unwrap();
                }
                let seg = c.segment().unwrap();
                // Rank 0's next arrival, made here, reads line 2; then
                // rank 1's reads 99.
                sync.wait();
                if r == 0 {
                    seg.line_pick().store(3, SeqCst);
                    assert_eq!(seg.line_step(), Ok(true));
                    assert_eq!(seg.line_slot(), 2);
                }
                sync.wait();
                if r == 1 {
                    seg.line_pick().store(99, SeqCst);
                }
                sync.wait();
                barrier()
            }));
        });
        let out = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("a rank hung");
        assert!(out.iter().all(|o| o.is_err()), "{out:?}");
    }

    #[test]
    fn tickets_pack_into_the_express_payload() {
        for t in [
            Ticket::Line(line::Count(0), 0),
            Ticket::Line(line::Count(line::COUNT), 15),
            Ticket::Counter,
            Ticket::Toggle(toggle::Target(0)),
            Ticket::Toggle(toggle::Target(u32::MAX)),
            Ticket::Polled(polled::Count(0)),
            Ticket::Polled(polled::Count(u32::MAX)),
        ] {
            assert!(t.pack() < 1 << crate::express::PAYLOAD_BITS, "{t:?}");
            assert_eq!(Ticket::unpack(t.pack()), t);
        }
    }
}
