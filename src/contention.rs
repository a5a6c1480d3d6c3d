//! Whether this process's waits share their core with other runnable
//! tasks, found by watching its own yields.
//!
//! The automatic policy gives a rank its core (it spins) when the node's
//! ranks are no more than the cores online (`wait::WaitPolicy::for_node`).
//! That count cannot see ranks confined to fewer CPUs than the machine has
//! (`taskset`, a cgroup's cpuset, `--cpu-set` with overloaded binding):
//! there a spinning waiter holds the very core its peer needs until its
//! wait counts as long (`wait::LONG_WAIT_POLLS`, 100–135 µs) and yields,
//! which made 2 ranks under `taskset -c 0` take 107–119 µs a barrier
//! against 7–10 µs with `coll_hwbarr_idle yield` (docs/benchmarks.md).
//!
//! A long wait's yields tell: one that hands the core to another task
//! counts as an involuntary context switch of this thread
//! (`getrusage(RUSAGE_THREAD)`), one that finds nobody else runnable
//! returns at once and counts nothing. A waiter alone on its core whose
//! peer computes (the usual long wait) yields without switches; on a
//! shared core its yields switch, though not every one (the scheduler may
//! pick the yielder again: 351 of 1,000 yields beside a busy loop here).
//! So switches score up and quiet yields down, and a score of
//! `SHARE_SCORE` turns the process's automatic policy to giving its core
//! up (`wait::WaitPolicy::given_up`) for its next `SHARED_LOOKS` waits,
//! after which it spins again and finds out anew (a few long waits, under
//! a millisecond, per 100,000 waits, and where the thread could move up to
//! `MOVE_TRIES` more findings, below). Only waits whose policy
//! was chosen automatically (`WaitPolicy::adapts`) take part; `idle spin`
//! set by the user is kept.
//!
//! MPI_Ibarrier and the persistent barrier wait in Open MPI's own loops
//! (`MPI_Wait`, `MPI_Test`), which turn progress and nothing else: there
//! hwbarr's progress callback plays the waiter's part (`after_pass`).
//! Passes that find a barrier still in flight and finish nothing yield
//! where its communicator's waiters give their core up (cores shared by
//! count or by setting) or, if its policy adapts, where the core is found
//! shared; and once such passes run long (`LONG_IDLE_PASSES` in a row) every `TELL_EVERY`-th
//! yields and tells: without that a waiter in `MPI_Wait` held a shared
//! core for the scheduler's whole time slice (4 ms a barrier at 2 ranks
//! under `taskset -c 0`, docs/benchmarks.md).
//!
//! A finding may also come from ranks that could each have a CPU but
//! started on one (an unbound launch places 2 ranks so now and then): two
//! waiters that yield to each other there both look cache-hot to the idle
//! CPU's balancer, which leaves them together for 12-57 ms. So the first
//! `MOVE_TRIES` findings in a row (since the last one kept, each within
//! `TRIES_FORGOTTEN_MS` of the one before) are let go, each a try at
//! moving (`step_aside`): on try k the process whose rank on the node has
//! bit k set moves its waiting thread to another CPU its affinity allows
//! (one in its L3 domain where it may: `shm::sched::make_room`),
//! and both spin on and look anew; a rank whose affinity allows one CPU
//! only keeps its finding at once.
//!
//! Process-wide: the core is the process's, whichever communicator found
//! it shared. A heuristic, not a protocol: its counters are plain std
//! atomics (no loom model), and whatever it concludes only changes how a
//! rank waits, never whether a barrier is correct.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

pub use crate::shm::sched::{yield_and_tell, Aside};
use std::sync::OnceLock;

/// Score at which the core counts as shared.
pub const SHARE_SCORE: u32 = 6;
/// Findings in a row let go, each a try at moving off the CPU, before one
/// is kept.
pub const MOVE_TRIES: u32 = 3;
/// A finding this long after the last try starts the tries anew: findings
/// on a shared CPU come about 1 ms apart (3 long waits), so a later one
/// means the ranks met again after a move that worked.
const TRIES_FORGOTTEN_MS: u64 = 100;
/// Findings let go, however far apart, before one is kept.
const MAX_LET_GO: u32 = 3 * MOVE_TRIES;

/// Milliseconds since a finding first asked (a finding's clock).
fn since_start_ms() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64
}
/// What a yield that switched to another task adds to the score.
const SWITCH_SCORE: u32 = 2;
/// Waits (those that get past their first polls) made with the core given
/// up before the process spins again and re-tests.
pub const SHARED_LOOKS: u32 = 100_000;
/// Idle passes in a row (a barrier in flight, nothing finished) after
/// which progress passes begin to test the core with a telling yield: as
/// many as a blocking wait polls before it counts as long
/// (`wait::LONG_WAIT_POLLS`; a unit test of `wait` keeps them equal).
pub const LONG_IDLE_PASSES: u64 = 4096;
/// Once passes run long, one in this many yields and tells (a yield and
/// two `getrusage` calls, none of which switches where the core is the
/// process's own): rare, because a pass may come from a program that tests
/// between pieces of its own work.
pub const TELL_EVERY: u64 = 1024;

/// What a progress pass left in flight, by the most telling communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Waiting {
    /// Nothing, or barriers whose waiters keep their core as the user set.
    Nothing,
    /// A barrier of a communicator whose policy adapts (`wait::WaitPolicy::adapts`).
    OwnCore,
    /// A barrier of a communicator whose waiters give their core up (ranks
    /// outnumber cores, or `coll_hwbarr_idle` says so).
    SharedCore,
}

/// What a progress pass leaves its caller to do (`Contention::after_pass`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassStep {
    Nothing,
    /// The core is found shared: hand it over.
    Yield,
    /// Test the core: yield and tell `yielded` whether that switched.
    YieldAndTell,
}

/// The process's finding.
pub struct Contention {
    score: AtomicU32,
    /// Looks left with the core given up (0: spin).
    left: AtomicU32,
    /// Whether the finding was reported once already.
    told: AtomicBool,
    /// Whether a move was reported once already.
    told_move: AtomicBool,
    /// A finding kept or a move made since the last `news`.
    unsaid: AtomicBool,
    /// Tries in a row (`yielded`): read as 0 once the last try is
    /// `TRIES_FORGOTTEN_MS` ago.
    tries: AtomicU32,
    /// When the last try was (`since_start_ms`).
    last_try: AtomicU64,
    /// Findings let go since the last one kept, however far apart.
    let_go: AtomicU32,
    /// Tries that moved a thread (said at MPI_Finalize, verbosity 2).
    moves: AtomicU32,
    /// A move whose thread did not get its affinity back: no more tries.
    stuck: AtomicBool,
    /// Whether that was reported already.
    told_stuck: AtomicBool,
    /// What progress passes write (`Passes`), on lines of their own: a
    /// thread waiting in MPI_Wait writes them on every pass, while other
    /// threads' blocking waits read `left` on every round.
    passes: Passes,
}

/// The progress passes' counts (`Contention::after_pass`).
#[repr(align(128))]
struct Passes {
    /// Passes in a row that found a barrier in flight and finished
    /// nothing. Process-wide, plain load and store: under
    /// MPI_THREAD_MULTIPLE one thread's finished barrier starts another's
    /// count anew and passes of several threads may lose a count, which
    /// only delays a test (blocking waits make the finding too).
    idle: AtomicU64,
    /// Yields those passes made (said at MPI_Finalize, verbosity 2).
    yields: AtomicU64,
}

impl Contention {
    pub const fn new() -> Contention {
        Contention {
            score: AtomicU32::new(0),
            left: AtomicU32::new(0),
            told: AtomicBool::new(false),
            told_move: AtomicBool::new(false),
            unsaid: AtomicBool::new(false),
            tries: AtomicU32::new(0),
            last_try: AtomicU64::new(0),
            let_go: AtomicU32::new(0),
            moves: AtomicU32::new(0),
            stuck: AtomicBool::new(false),
            told_stuck: AtomicBool::new(false),
            passes: Passes { idle: AtomicU64::new(0), yields: AtomicU64::new(0) },
        }
    }

    /// After a long wait's yield: whether it `switched` to another task.
    /// Returns true when this yield found the core shared and the finding
    /// is kept. The first `MOVE_TRIES` findings in a row (since the last
    /// one kept, each less than `TRIES_FORGOTTEN` after the one before)
    /// are let go where the thread could move: each calls `step_aside`
    /// with its number (0, 1, ...), which may move the thread to another
    /// CPU, and the process spins on and looks anew. Tries far apart start
    /// at 0 again (the ranks met again after a move that worked), but no
    /// more than `MAX_LET_GO` findings in all are let go before one is
    /// kept: a rank whose number says stay would else never keep one.
    pub fn yielded(&self, switched: bool, step_aside: impl FnOnce(u32) -> Aside) -> bool {
        self.yielded_at(switched, since_start_ms, step_aside)
    }

    /// `yielded`, with the time in ms read from `now` (only at a finding).
    fn yielded_at(&self, switched: bool, now: impl FnOnce() -> u64, step_aside: impl FnOnce(u32) -> Aside) -> bool {
        let score = if switched {
            self.score.fetch_add(SWITCH_SCORE, Relaxed) + SWITCH_SCORE
        } else {
            let _ = self.score.fetch_update(Relaxed, Relaxed, |s| s.checked_sub(1));
            return false;
        };
        if score < SHARE_SCORE {
            return false;
        }
        self.score.store(0, Relaxed);
        if !self.stuck.load(Relaxed) && self.let_go.load(Relaxed) < MAX_LET_GO {
            let now = now();
            let last = self.last_try.load(Relaxed);
            let tried = if now.saturating_sub(last) >= TRIES_FORGOTTEN_MS { 0 } else { self.tries.load(Relaxed) };
            if tried < MOVE_TRIES {
                let aside = step_aside(tried);
                if matches!(aside, Aside::Moved | Aside::Stuck) {
                    self.moves.fetch_add(1, Relaxed);
                    if aside == Aside::Stuck {
                        self.stuck.store(true, Relaxed);
                    }
                    self.unsaid.store(true, Release);
                }
                if aside != Aside::Nowhere {
                    self.tries.store(tried + 1, Relaxed);
                    self.last_try.store(now, Relaxed);
                    self.let_go.fetch_add(1, Relaxed);
                    return false;
                }
            }
        }
        self.tries.store(0, Relaxed);
        self.let_go.store(0, Relaxed);
        self.left.store(SHARED_LOOKS, Relaxed);
        self.unsaid.store(true, Release);
        true
    }

    /// Tries that moved a thread to another CPU so far.
    pub fn moves(&self) -> u32 {
        self.moves.load(Relaxed)
    }

    /// Is the core taken for shared now? One relaxed load: every round of
    /// a wait asks it.
    #[inline]
    pub fn shared(&self) -> bool {
        self.left.load(Relaxed) > 0
    }

    /// `shared`, counting this look against `SHARED_LOOKS`.
    #[inline]
    pub fn look(&self) -> bool {
        self.shared() && self.left.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// After a progress pass: whether it `finished` a barrier, and what is
    /// `waiting` still. Idle passes yield where the communicator's waiters
    /// give their core up; for those whose policy adapts, where the core is
    /// found shared (the first idle pass of a stretch counts one look
    /// against the finding's term, as a blocking wait does), and late in a
    /// stretch now and then to test it.
    #[inline]
    pub fn after_pass(&self, finished: bool, waiting: Waiting) -> PassStep {
        if finished || waiting == Waiting::Nothing {
            if self.passes.idle.load(Relaxed) != 0 {
                self.passes.idle.store(0, Relaxed);
            }
            return PassStep::Nothing;
        }
        let n = self.passes.idle.load(Relaxed) + 1;
        self.passes.idle.store(n, Relaxed);
        if waiting == Waiting::SharedCore {
            return PassStep::Yield;
        }
        let shared = if n == 1 { self.look() } else { self.shared() };
        if shared {
            PassStep::Yield
        } else if n >= LONG_IDLE_PASSES && (n - LONG_IDLE_PASSES).is_multiple_of(TELL_EVERY) {
            PassStep::YieldAndTell
        } else {
            PassStep::Nothing
        }
    }

    /// A progress pass yielded (`after_pass`'s step, taken).
    pub fn pass_yielded(&self) {
        self.passes.yields.fetch_add(1, Relaxed);
    }

    /// Yields progress passes made so far.
    pub fn pass_yields(&self) -> u64 {
        self.passes.yields.load(Relaxed)
    }

    /// Whether a finding was kept or a thread moved since the last call:
    /// one load where nothing happened (every wait asks).
    #[inline]
    pub fn news(&self) -> bool {
        self.unsaid.load(Relaxed) && self.unsaid.swap(false, Acquire)
    }

    /// True once per process, the first time it is asked after the core
    /// was found shared (a load, and a swap only that once).
    pub fn first_finding(&self) -> bool {
        !self.told.load(Relaxed) && !self.told.swap(true, Relaxed)
    }

    /// True once per process, the first time it is asked after a move left
    /// its thread without its affinity (`Aside::Stuck`).
    pub fn first_stuck(&self) -> bool {
        self.stuck.load(Relaxed) && !self.told_stuck.swap(true, Relaxed)
    }

    /// True once per process, the first time it is asked after a thread
    /// moved.
    pub fn first_move(&self) -> bool {
        self.moves() > 0 && !self.told_move.load(Relaxed) && !self.told_move.swap(true, Relaxed)
    }
}

/// A finding's try at ending the sharing (`Contention::yielded`): on try
/// `k` the thread moves to another CPU if bit `k` of its process's rank on
/// the node is set. Two ranks on one CPU that both moved would meet again
/// on the next; numbers that differ in one of their low `MOVE_TRIES` bits
/// split them. Those that do not (ranks 0 and 8; two jobs, or a spawned
/// one, whose node ranks repeat; two threads of one process) are not split
/// by this: they keep their finding after the tries.
pub fn step_aside(try_number: u32) -> Aside {
    crate::shm::sched::make_room((node_rank() >> try_number.min(31)) & 1 == 1)
}

/// This process's rank on its node (`set_node_rank`); `u32::MAX` until set.
static NODE_RANK: AtomicU32 = AtomicU32::new(u32::MAX);

/// Tells `step_aside` this process's rank among its job's ranks on the
/// node (the runtime's, read once with the node's facts).
pub fn set_node_rank(rank: u32) {
    NODE_RANK.store(rank, Relaxed);
}

/// This process's rank on its node, else its pid.
fn node_rank() -> u32 {
    match NODE_RANK.load(Relaxed) {
        u32::MAX => std::process::id(),
        r => r,
    }
}

impl Default for Contention {
    fn default() -> Self {
        Contention::new()
    }
}

/// The process's finding, fed by `wait`'s long waits and by progress
/// passes (`after_pass`).
pub static CONTENTION: Contention = Contention::new();

#[cfg(test)]
mod tests {
    use super::*;

    /// Switching yields score the core shared; quiet yields between them
    /// pull the score down, so that a busy neighbour now and then does not.
    #[test]
    fn switches_find_the_core_shared_and_quiet_yields_do_not() {
        let c = Contention::new();
        assert!(!c.yielded(true, |_| Aside::Nowhere) && !c.yielded(true, |_| Aside::Nowhere));
        assert!(c.yielded(true, |_| Aside::Nowhere), "three switches in a row: shared");
        assert!(c.shared());

        let c = Contention::new();
        for _ in 0..1000 {
            assert!(!c.yielded(false, |_| Aside::Nowhere));
        }
        // A switch now and then among quiet yields (a daemon) never adds up.
        for i in 0..1000 {
            assert!(!c.yielded(i % 3 == 0, |_| Aside::Nowhere), "at {i}");
        }
        assert!(!c.shared());
        // As often as beside a busy loop here (about 1 in 3, with quiet
        // yields between): the score still climbs.
        let c = Contention::new();
        let found = (0..200).any(|i| c.yielded(i % 3 != 2, |_| Aside::Nowhere));
        assert!(found && c.shared());
    }

    /// Progress passes: nothing until a barrier has waited long, then one
    /// telling yield every `TELL_EVERY` idle passes; a finished barrier or
    /// none in flight starts the count anew; cores shared by count yield on
    /// every idle pass; with the core found shared every idle pass yields,
    /// and a stretch counts one look.
    #[test]
    fn passes_test_the_core_late_and_yield_once_it_is_shared() {
        let c = Contention::new();
        let steps = |c: &Contention, n: u64| (0..n).map(|_| c.after_pass(false, Waiting::OwnCore)).collect::<Vec<_>>();
        let s = steps(&c, LONG_IDLE_PASSES + 2 * TELL_EVERY);
        let tells: Vec<usize> = s.iter().enumerate().filter(|(_, &x)| x != PassStep::Nothing).map(|(i, _)| i).collect();
        let first = LONG_IDLE_PASSES as usize - 1;
        assert_eq!(tells, vec![first, first + TELL_EVERY as usize, first + 2 * TELL_EVERY as usize]);
        assert!(s.iter().all(|&x| x != PassStep::Yield));
        // A pass that finished something, or found nothing waiting, starts
        // the count anew.
        for reset in [(true, Waiting::OwnCore), (false, Waiting::Nothing)] {
            assert_eq!(c.after_pass(reset.0, reset.1), PassStep::Nothing);
            assert!(steps(&c, LONG_IDLE_PASSES - 1).iter().all(|&x| x == PassStep::Nothing));
            assert_eq!(c.after_pass(false, Waiting::OwnCore), PassStep::YieldAndTell);
        }
        // Cores shared by count or by setting: every idle pass yields, no
        // look, no test; a finished barrier yields nothing.
        for _ in 0..3 {
            assert_eq!(c.after_pass(false, Waiting::SharedCore), PassStep::Yield);
        }
        assert_eq!(c.after_pass(true, Waiting::SharedCore), PassStep::Nothing);
        assert!(!c.shared());
        // A stretch begins before the finding.
        assert_eq!(c.after_pass(false, Waiting::OwnCore), PassStep::Nothing);
        // Shared: every idle pass yields; a stretch is one look.
        (0..3).for_each(|_| {
            c.yielded(true, |_| Aside::Nowhere);
        });
        assert!(steps(&c, 10).iter().all(|&x| x == PassStep::Yield));
        assert_eq!(c.left.load(Relaxed), SHARED_LOOKS, "no new stretch, no look");
        c.after_pass(true, Waiting::OwnCore);
        assert_eq!(c.after_pass(false, Waiting::OwnCore), PassStep::Yield);
        assert_eq!(c.left.load(Relaxed), SHARED_LOOKS - 1, "a new stretch: one look");
        // Nothing waiting: nothing to yield for, shared or not.
        assert_eq!(c.after_pass(false, Waiting::Nothing), PassStep::Nothing);
    }

    /// Three switching yields at time `at`: one finding, whose try (if it
    /// makes one) `aside` answers and `asked` records. Whether it was kept.
    fn finding(c: &Contention, at: u64, aside: Aside, asked: &std::cell::RefCell<Vec<u32>>) -> bool {
        let mut kept = false;
        for _ in 0..3 {
            kept = c.yielded_at(
                true,
                || at,
                |k| {
                    asked.borrow_mut().push(k);
                    aside
                },
            );
        }
        kept
    }

    /// Where the thread could move, the first `MOVE_TRIES` findings are let
    /// go, each a try numbered from 0, and the next is kept; after the
    /// finding's term the tries begin anew. Where it could not, a finding
    /// is kept at once. Moves are counted, and news of them and of a kept
    /// finding is given once.
    #[test]
    fn findings_first_try_to_move() {
        let asked = std::cell::RefCell::new(Vec::new());
        // All at one time, so that the tries run in a row.
        let find = |c: &Contention, aside: Aside| finding(c, 1000, aside, &asked);
        let c = Contention::new();
        assert!(!c.news());
        for (i, aside) in [Aside::Stayed, Aside::Moved, Aside::Stayed].into_iter().enumerate() {
            assert!(!find(&c, aside) && !c.shared(), "try {i}: let go");
        }
        assert_eq!(c.moves(), 1);
        assert!(c.news() && !c.news(), "a move is news, once");
        assert!(c.first_move() && !c.first_move());
        assert!(!c.shared(), "nothing found yet");
        assert!(find(&c, Aside::Stayed) && c.shared(), "the fourth finding is kept");
        assert_eq!(*asked.borrow(), [0, 1, 2], "the kept finding asks nothing");
        assert!(c.news() && c.first_finding());
        while c.look() {}
        assert!(!find(&c, Aside::Moved) && !c.shared(), "a new term: tries again");
        assert_eq!(asked.borrow().last(), Some(&0));
        assert!(c.news() && !c.first_move(), "a second move is news, but told once");

        let c = Contention::new();
        asked.borrow_mut().clear();
        assert!(find(&c, Aside::Nowhere) && c.shared(), "nowhere to go: kept at once");
        assert_eq!(*asked.borrow(), [0]);
        assert_eq!(c.moves(), 0);
    }

    /// Tries count in a row: a finding `TRIES_FORGOTTEN_MS` after the last
    /// try starts them anew (the ranks met again after a move that
    /// worked), up to `MAX_LET_GO` findings let go in all. A move that left
    /// its thread without its affinity ends the tries for good: findings
    /// are kept at once, and news of it is given once.
    #[test]
    fn tries_start_anew_after_a_pause_and_end_when_stuck() {
        let asked = std::cell::RefCell::new(Vec::new());
        let find = |c: &Contention, at: u64, aside: Aside| finding(c, at, aside, &asked);
        let c = Contention::new();
        assert!(!find(&c, 1000, Aside::Moved));
        assert!(!find(&c, 1000 + TRIES_FORGOTTEN_MS - 1, Aside::Stayed), "soon after: the next try");
        assert!(!find(&c, 1000 + 3 * TRIES_FORGOTTEN_MS, Aside::Moved), "long after: try 0 again");
        assert!(!find(&c, 1000 + 3 * TRIES_FORGOTTEN_MS, Aside::Stuck));
        assert_eq!(*asked.borrow(), [0, 1, 0, 1]);
        assert_eq!(c.moves(), 3);
        assert!(c.news() && c.first_stuck() && !c.first_stuck());
        assert!(find(&c, 1000 + 9 * TRIES_FORGOTTEN_MS, Aside::Moved) && c.shared(), "stuck: kept at once");
        assert_eq!(asked.borrow().len(), 4, "no try once stuck");

        // A rank told to stay, whose findings come far apart: each is try
        // 0, but after `MAX_LET_GO` of them one is kept.
        let c = Contention::new();
        asked.borrow_mut().clear();
        for i in 0..MAX_LET_GO as u64 {
            assert!(!find(&c, (i + 1) * 10 * TRIES_FORGOTTEN_MS, Aside::Stayed));
        }
        assert!(asked.borrow().iter().all(|&k| k == 0));
        assert!(find(&c, 1000 * TRIES_FORGOTTEN_MS, Aside::Stayed) && c.shared(), "kept after the most let go");
        assert_eq!(asked.borrow().len(), MAX_LET_GO as usize);
    }

    /// The finding lasts `SHARED_LOOKS` looks, then the process spins again.
    #[test]
    fn the_finding_runs_out() {
        let c = Contention::new();
        assert!(!c.look());
        (0..3).for_each(|_| {
            c.yielded(true, |_| Aside::Nowhere);
        });
        for i in 0..SHARED_LOOKS {
            assert!(c.look(), "look {i}");
        }
        assert!(!c.look() && !c.shared());
        assert!(c.first_finding() && !c.first_finding());
    }
}
