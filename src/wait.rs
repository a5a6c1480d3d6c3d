//! How a rank waits for a barrier to release it. The cores only poll; this
//! decides what to do between polls: spin while the releasing peer can run
//! on another core, and turn MPI progress and yield the core when ranks
//! outnumber cores (a spinning waiter would otherwise hold the very core
//! its releaser needs).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::contention::{self, Contention, CONTENTION};
pub use crate::settings::Idle;

/// Rounds a `Sleep` waiter yields before it sleeps.
pub const YIELDS_BEFORE_SLEEP: u32 = 3;

/// How long a `Sleep` waiter keeps yielding, after those rounds, before its
/// first sleep in a wait. A sleeper's wake-up costs what a barrier of ranks
/// that all run costs many times over where the sleeper's CPU went idle: on
/// a VM whose idle vCPUs halt at once (no halt polling in the guest), each
/// such wake-up costs tens of µs, and 3 ranks on 2 vCPUs that slept after 3
/// rounds took 14-41 µs per barrier against 1.2 µs yielding (kernel 6.18,
/// `docs/benchmarks.md`, 2026-11-28). Yielding first keeps a barrier whose
/// ranks are all in it awake; a long wait (a peer computing) still sleeps
/// and leaves the core to it.
pub const YIELD_BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// Polls after which a wait counts as long: about 135 µs at 33 ns a poll,
/// far above a barrier whose ranks all run (0.05–0.1 µs here). From then
/// on a `Spin` or `Yield` waiter turns MPI progress after every poll and
/// yields its core each round, as Open MPI's own waits do under
/// `mpi_yield_when_idle`:
/// - its peers may be waiting for its progress (a rendezvous send to it,
///   a one-sided operation it is the target of): with 256 polls per turn
///   each such step waited up to 8 µs, and with the futex sleep this
///   replaced up to 200 µs (IMB-RMA's puts on Open MPI 5.0: 234 µs
///   against 0.26 without hwbarr);
/// - a waiter that gets this far may share its core with something else
///   (another job, a daemon, its own peer): spinning would hold the core
///   its releaser needs for a whole scheduler slice (2 ranks under
///   `taskset -c 0`: 4 ms per barrier), yielding gives it up.
pub const LONG_WAIT_POLLS: u64 = 4096;

/// A progress turn at least this long may have done work, on an Open MPI
/// whose progress engine does not say (4.1): `Turn::TookLong`. An idle
/// turn runs each transport's poll and returns in well under a
/// microsecond (16-64 ns in nearly all turns of a sleeping waiter, 4.1.4
/// on a VM); serving a peer's rendezvous (matching it and copying the
/// message in) or a one-sided operation takes microseconds, and so does
/// the engine's periodic poll of its event loop. A turn stretched by the
/// scheduler counts too: that only keeps a waiter awake a while longer.
pub const WORK_TURN: Duration = Duration::from_micros(2);

/// Did a progress turn that took `took` take long (4.1's engine, which
/// returns nothing: `Turn::TookLong`)?
pub fn turn_took_long(took: Duration) -> bool {
    took >= WORK_TURN
}

/// Polls a `Sleep` waiter stays awake after a turn that took long
/// (`Turn::TookLong`), where a counted turn keeps it awake for
/// `LONG_WAIT_POLLS`: each of 4.1's periodic event-loop polls would
/// otherwise keep it awake about as long as the period itself, and a
/// waiter of a long wait took 17-41% of a CPU instead of sleeping (Open
/// MPI 4.1.4, 3 ranks on 2 cores, a peer computing 1 s). A peer's next
/// step that comes later waits out a sleep (`SLEEP_SLICE`) at most.
pub const AWAKE_AFTER_LONG_TURN: u64 = 64;

/// Longest sleep before a sleeping waiter turns MPI progress again.
pub const SLEEP_SLICE: std::time::Duration = std::time::Duration::from_micros(200);

/// Polls per progress turn when a rank has its core to itself. Each poll
/// but a round's last also pauses (`spin_loop`): 33 ns on an AMD EPYC, so
/// 256 polls take about 8 µs.
pub const SPINS_OWN_CORE: u32 = 256;

/// Polls per progress turn, and a yield after each turn, while the threads
/// of a process waiting at once (MPI_THREAD_MULTIPLE) outnumber the cores
/// with the other ranks' (`Crowd`). Measured with 4 threads per rank each on
/// its own communicator, 2 ranks on 2 cores (examples/threads_bench): 1
/// poll per turn 3-8 µs per barrier, 16 polls 0.2-2 µs, 256 polls up to
/// 17 µs when a pair's two threads share a core.
pub const SPINS_CROWDED: u32 = 16;

/// The wait of a blocking barrier on the device, after its arrival: the
/// polls and rounds it makes before the general loop, inlined there with
/// the arrival (`barrier::device::barrier`), then `rest`, the general loop,
/// told how many rounds were made. Both lie on the way from one barrier to
/// the next: a rank that keeps its core polls up to `first_round` times
/// first (2 ranks: docs/benchmarks.md, "The blocking barrier's own path");
/// one that gives its core up makes its quiet rounds here as bare rounds
/// (`bare_rounds`), after which the loop counts on, so that its turns and
/// sleeps come in the rounds they would without them. With the quiet
/// rounds inside the general loop instead, hwbarr's barrier read
/// 0.04-0.12x the floor more at 4 and 8 ranks on 2 cores; why its setup
/// costs that much there is not resolved (docs/benchmarks.md,
/// "Oversubscribed: the first rounds inlined").
#[inline(always)]
pub fn after_arrival<E>(
    policy: WaitPolicy,
    crowd: Option<Crowd>,
    mut done: impl FnMut() -> Result<bool, E>,
    rest: impl FnOnce(u32) -> Result<(), E>,
) -> Result<(), E> {
    for _ in 0..first_round(policy, crowd) {
        if done()? {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    after_first_round(policy, crowd, done, rest)
}

/// `after_arrival` from the end of its first round on: the bare rounds,
/// then `rest`. For a wait whose first round was made apart (MPI_Barrier's
/// line path, `barrier::device::line_barrier`).
#[inline(always)]
pub fn after_first_round<E>(
    policy: WaitPolicy,
    crowd: Option<Crowd>,
    mut done: impl FnMut() -> Result<bool, E>,
    rest: impl FnOnce(u32) -> Result<(), E>,
) -> Result<(), E> {
    let bare = bare_rounds(policy, crowd);
    for _ in 0..bare {
        if done()? {
            return Ok(());
        }
        std::thread::yield_now();
    }
    rest(bare)
}

/// Polls a blocking barrier makes before the general loop (`wait_by`)
/// with its setup (`after_arrival`): the policy's own round, at most
/// `SPINS_CROWDED`; none for a crowd of waiting threads, whose loop counts
/// a thread among the waiters from its first poll, and none for a waiter
/// that polls once a round (a shared core, or `spin` 1): one more poll
/// before its round only delays the hand-off or the progress turn. The
/// loop then starts afresh.
pub fn first_round(policy: WaitPolicy, crowd: Option<Crowd>) -> u32 {
    if crowd.is_some() || policy.spins <= 1 {
        0
    } else {
        policy.spins.min(SPINS_CROWDED)
    }
}

/// Rounds a blocking barrier makes before the general loop as bare rounds,
/// each one poll and a hand-off of the core (`after_arrival`): the quiet
/// rounds (`WaitPolicy::on_device`) of a waiter that polls once a round
/// and is not one of a crowd of threads (whose loop counts it as a waiter
/// from its first poll); never more than the rounds it yields before it
/// may sleep, which a bare round could not tell.
fn bare_rounds(policy: WaitPolicy, crowd: Option<Crowd>) -> u32 {
    if crowd.is_none() && yields_each_round(policy) {
        policy.quiet.min(YIELDS_BEFORE_SLEEP)
    } else {
        0
    }
}

/// Does a waiter by `policy` poll once a round and give its core up after
/// each (the bare rounds' and the start window's yielding waiter)?
fn yields_each_round(policy: WaitPolicy) -> bool {
    policy.spins == 1 && !policy.keeps_core()
}

/// Polls a nonblocking barrier (MPI_Ibarrier, a started persistent
/// barrier) whose rank keeps its core makes in its start, after its
/// arrival, before it leaves the release to progress (`StartWindow`): a few
/// cache-line transfers' time, about 0.25 µs on an Intel Xeon whose PAUSE
/// takes 21 ns.
pub const START_POLLS: u32 = 8;

/// Rounds of a yield and a poll that such a start makes instead where its
/// rank gives its core up (`StartWindow`).
pub const START_YIELDS: u32 = 1;

/// Most starts a communicator makes without a window after windows that saw
/// no release (`StartWindow`).
pub const START_SKIP_MAX: u32 = 64;

/// A communicator's record of the windows its nonblocking starts made. A
/// request waits in MPI_Wait by turning Open MPI's progress, which first
/// returns from MPI_Start and enters MPI_Wait and the engine: where the
/// peers arrive close behind, the release is seen that much later than a
/// blocking barrier sees it. A start that first looks a little longer
/// completes its request there, as the blocking barrier's first round and
/// bare rounds would (`after_arrival`): a rank that keeps its core polls
/// (`START_POLLS`; where the caller says polls pay), one that gives its
/// core up yields it once to the peers it waits for and looks again
/// (`START_YIELDS`). Measured (docs/benchmarks.md, "Nonblocking starts: a
/// short window before progress"): 2 ranks' persistent barrier on the line
/// core 0.18 µs against 0.21 without on Open MPI 4.1.4 (4% less on 5.0 and
/// 6.0), and 4 and 8 ranks on 2 cores 1.07-1.13x the blocking barrier with
/// the yield against 1.16-1.24x, on every line. Where the peers come late,
/// the case nonblocking barriers exist for, the window only costs: a window
/// that sees no release has the next starts skip theirs, 1, 2, 4 ... up to
/// `START_SKIP_MAX` of them, and one that sees it ends the skipping. A
/// crowd of threads makes none.
#[derive(Default)]
pub struct StartWindow {
    /// Starts still to skip.
    skip: AtomicU32,
    /// The last skip set (0 after a window that saw the release).
    backoff: AtomicU32,
    /// What the starts did, for the verbose report (`counts`).
    made: AtomicU64,
    seen: AtomicU64,
    skipped: AtomicU64,
}

/// What a communicator's starts' windows did (`StartWindow::counts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Windows made.
    pub made: u64,
    /// Windows that saw their release.
    pub seen: u64,
    /// Starts that skipped theirs after windows that saw none.
    pub skipped: u64,
}

/// Adds one to a counter only its communicator's issuer writes (MPI orders
/// a communicator's collectives): a plain load and store, no locked add on
/// a barrier's or a start's path.
#[inline(always)]
pub(crate) fn bump(n: &AtomicU64) {
    n.store(n.load(Relaxed) + 1, Relaxed);
}

/// A start's window: its polls, or its rounds of a yield and a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    None,
    Polls(u32),
    Yields(u32),
}

impl Window {
    /// The window of a start by `policy`; polls only if `polls_pay`.
    fn of(policy: WaitPolicy, crowd: Option<Crowd>, polls_pay: bool) -> Window {
        if crowd.is_some() {
            Window::None
        } else if yields_each_round(policy) {
            Window::Yields(START_YIELDS)
        } else {
            match first_round(policy, crowd).min(START_POLLS) {
                n if n > 0 && polls_pay => Window::Polls(n),
                _ => Window::None,
            }
        }
    }
}

impl StartWindow {
    /// Looks at `done` through this start's window (see above), unless it
    /// skips; true if it said released. An error of `done` ends it.
    pub fn poll<E>(
        &self,
        policy: WaitPolicy,
        crowd: Option<Crowd>,
        polls_pay: bool,
        mut done: impl FnMut() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let (rounds, yields) = match Window::of(policy, crowd, polls_pay) {
            Window::None => return Ok(false),
            Window::Polls(n) => (n, false),
            Window::Yields(n) => (n, true),
        };
        let skip = self.skip.load(Relaxed);
        if skip > 0 {
            self.skip.store(skip - 1, Relaxed);
            bump(&self.skipped);
            return Ok(false);
        }
        bump(&self.made);
        for _ in 0..rounds {
            if yields {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if done()? {
                self.backoff.store(0, Relaxed);
                bump(&self.seen);
                return Ok(true);
            }
        }
        let backoff = self.backoff.load(Relaxed).saturating_mul(2).clamp(1, START_SKIP_MAX);
        self.backoff.store(backoff, Relaxed);
        self.skip.store(backoff, Relaxed);
        Ok(false)
    }

    /// What the windows did so far.
    pub fn counts(&self) -> WindowCounts {
        WindowCounts {
            made: self.made.load(Relaxed),
            seen: self.seen.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
        }
    }
}

/// What one turn of Open MPI's progress engine did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// It did work (5.0 and later count events).
    Worked,
    /// It took long (`WORK_TURN`), on 4.1, whose engine does not count: it
    /// did work, or it was one of the engine's periodic polls of its event
    /// loop (about every 10 ms, each 2-30 µs on a VM), which the time does
    /// not tell apart.
    TookLong,
    /// Nothing that it could tell.
    Idle,
    /// Idle, and the engine would have yielded the core after it (4.1 with
    /// `mpi_yield_when_idle`, whose turn hwbarr times without that yield):
    /// the waiter yields once it has checked its own wait.
    IdleYield,
}

/// The waiting policy of one communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Polls between two turns of MPI progress.
    pub spins: u32,
    /// Turn MPI progress at all (off only to prove the deadlock test bites).
    pub progress: bool,
    pub idle: Idle,
    /// Rounds at the start of a wait that turn no progress (`on_device`).
    pub quiet: u32,
    /// The policy was chosen automatically to keep the core: it gives the
    /// core up while the process finds it shared (`contention`).
    pub adapts: bool,
}

impl WaitPolicy {
    /// Whether a waiter keeps its core (spins) rather than giving it up.
    pub fn keeps_core(&self) -> bool {
        self.idle == Idle::Spin
    }

    /// Waiting for point-to-point operations: poll, turn progress, poll.
    pub const TURN_PROGRESS: WaitPolicy =
        WaitPolicy { spins: 1, progress: true, idle: Idle::Spin, quiet: 0, adapts: false };
    /// A blocking barrier queued behind others: poll, turn progress, yield.
    pub const TURN_PROGRESS_AND_YIELD: WaitPolicy =
        WaitPolicy { spins: 1, progress: true, idle: Idle::Yield, quiet: 0, adapts: false };

    /// This policy for a wait on the shared-memory device, whose own
    /// protocol needs no progress: a waiter that gives its core up turns
    /// none in the rounds it yields before it may sleep
    /// (`YIELDS_BEFORE_SLEEP`, so that it turns one before its first
    /// sleep). A barrier whose ranks are all in it is over within a few
    /// hand-offs of the cores; a turn in each of them took hwbarr's line
    /// barrier from about 1.2x to 1.4x the floor at 8 ranks on 2 cores
    /// (docs/benchmarks.md, "Oversubscribed: the wait loop's own cost"). A
    /// peer that needs this rank's progress (a rendezvous, a one-sided
    /// operation, a barrier in flight this rank leads) waits three
    /// hand-offs longer at most; a waiter that keeps its core already polls
    /// `spins` times before its first turn.
    pub fn on_device(self) -> WaitPolicy {
        WaitPolicy { quiet: if self.keeps_core() { 0 } else { YIELDS_BEFORE_SLEEP }, ..self }
    }

    /// This policy once the process found its core shared
    /// (`contention`), if it adapts: poll once a round and yield, as on a
    /// core the ranks share by count (without sleeping: the finding may be
    /// another job's task, which a sleeper's wake-up would not help). Only
    /// a communicator's own policy adapts, and only waits on the device
    /// use it, whose protocol needs no progress: as `on_device` makes them
    /// for yielding waiters, its first rounds turn none.
    pub fn given_up(self) -> WaitPolicy {
        if self.adapts && self.keeps_core() {
            WaitPolicy { spins: 1, idle: Idle::Yield, quiet: YIELDS_BEFORE_SLEEP, ..self }
        } else {
            self
        }
    }

    /// Chooses from facts — ranks on this node against the cores online,
    /// Open MPI's `mpi_yield_when_idle` — unless the user set `spin` (polls
    /// per progress turn; 0 = never turn progress) or `idle`. Cores are
    /// shared when ranks outnumber them or when the job says so with
    /// `mpi_yield_when_idle` (as fake nodes on one machine must): then a
    /// waiter polls once before it turns progress and gives the core up,
    /// since a longer spin only delays the rank it waits for.
    pub fn for_node(
        local_ranks: usize,
        cores: usize,
        yield_when_idle: bool,
        spin: i32,
        idle: Option<Idle>,
    ) -> WaitPolicy {
        let oversubscribed = local_ranks > cores;
        let shared = oversubscribed || yield_when_idle;
        let auto_spins = if shared { 1 } else { SPINS_OWN_CORE };
        WaitPolicy {
            spins: if spin > 0 { spin as u32 } else { auto_spins },
            progress: spin != 0,
            idle: idle.unwrap_or(if oversubscribed {
                Idle::Sleep
            } else if yield_when_idle {
                Idle::Yield
            } else {
                Idle::Spin
            }),
            quiet: 0,
            adapts: idle.is_none() && !shared,
        }
    }
}

/// What a communicator's waiting policy is chosen from. Kept with the
/// communicator, so that the policy can be chosen again when its layout
/// exchange (by host name) finds more of its ranks on this node than Open
/// MPI could tell at creation: ranks of another job joined by
/// MPI_Comm_connect, which Open MPI 4.1 takes for remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyFacts {
    /// The job's ranks on this node.
    pub job_ranks: usize,
    /// The communicator's ranks on this node, as far as known.
    pub comm_ranks: usize,
    pub cores: usize,
    pub yield_when_idle: bool,
    /// The `spin` and `idle` parameters.
    pub spin: i32,
    pub idle: Option<Idle>,
    pub thread_multiple: bool,
}

impl PolicyFacts {
    /// Ranks that may wait on this node's cores: the job's, or the
    /// communicator's own when it has more.
    pub fn ranks_here(&self) -> usize {
        self.job_ranks.max(self.comm_ranks)
    }

    pub fn policy(&self) -> WaitPolicy {
        WaitPolicy::for_node(self.ranks_here(), self.cores, self.yield_when_idle, self.spin, self.idle)
    }

    pub fn crowd(&self) -> Option<Crowd> {
        Crowd::for_node(self.ranks_here(), self.cores, self.yield_when_idle, self.spin, self.idle, self.thread_multiple)
    }

    /// The same facts with `ranks` of the communicator found on this node,
    /// when that is more than known so far (None otherwise: nothing changes).
    pub fn recounted(&self, ranks: usize) -> Option<PolicyFacts> {
        (ranks > self.comm_ranks).then_some(PolicyFacts { comm_ranks: ranks, ..*self })
    }
}

/// Under MPI_THREAD_MULTIPLE, when the ranks on a node have a core each
/// (the own-core policy spins and never gives its core up): the policy for
/// waits while more than `above` threads of this process wait at once. The
/// rule of `WaitPolicy::for_node` — waiters outnumber cores — counts
/// waiting threads too: with `t` waiting threads per rank there are
/// `t * local_ranks` waiters on the node. A spinning waiter whose peer
/// thread is queued on its own core holds that core for a whole scheduler
/// slice (measured: 7-10 ms per barrier with each pair's threads bound to
/// one core, 0.07 µs when bound apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crowd {
    pub above: usize,
    pub policy: WaitPolicy,
}

impl Crowd {
    /// None unless threads may wait at once (`thread_multiple`) and the
    /// automatic policy gives each rank its core (the user set neither
    /// `spin` nor `idle`, ranks do not outnumber cores, no
    /// `mpi_yield_when_idle`): the other cases already share the cores.
    pub fn for_node(
        local_ranks: usize,
        cores: usize,
        yield_when_idle: bool,
        spin: i32,
        idle: Option<Idle>,
        thread_multiple: bool,
    ) -> Option<Crowd> {
        let own_core = local_ranks <= cores && !yield_when_idle && spin < 0 && idle.is_none();
        (thread_multiple && own_core).then(|| Crowd {
            // w waiting threads per rank outnumber the cores when w > cores / local_ranks.
            above: cores / local_ranks.max(1),
            policy: WaitPolicy { spins: SPINS_CROWDED, progress: true, idle: Idle::Yield, quiet: 0, adapts: false },
        })
    }
}

/// Threads of this process in `try_wait_crowded` now.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Threads of this process waiting in hwbarr's crowded loop now
/// (`try_wait_crowded`): MPI_Barrier's line path on a communicator whose
/// waiters may be a crowd is taken only by a thread that finds none
/// (`Server::crowd_line_barrier`).
pub fn threads_waiting() -> usize {
    WAITING.load(Relaxed)
}

/// Held by the unit tests that wait in the crowded loop: `WAITING` is the
/// process's, and one of them checks its count.
#[cfg(test)]
pub fn crowd_test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a thread in `WAITING` while it lives.
struct Waiting;

impl Waiting {
    fn enter() -> Waiting {
        WAITING.fetch_add(1, Relaxed);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Relaxed);
    }
}

/// `try_wait_until` with `policy`, or `crowd`'s policy in the rounds where
/// more than `crowd.above` threads of this process wait here.
pub fn try_wait_crowded<E>(
    policy: WaitPolicy,
    crowd: Crowd,
    done: impl FnMut() -> Result<bool, E>,
    progress: impl FnMut() -> Turn,
    sleep: impl FnMut(),
) -> Result<(), E> {
    let _me = Waiting::enter();
    let choose = || if WAITING.load(Relaxed) > crowd.above { crowd.policy } else { policy };
    wait_by(choose, 0, done, progress, sleep)
}

/// Polls `done` until it is true: `try_wait_until` for conditions that
/// cannot fail.
pub fn wait_until(
    policy: WaitPolicy,
    mut done: impl FnMut() -> bool,
    progress: impl FnMut() -> Turn,
    sleep: impl FnMut(),
) {
    let r: Result<(), std::convert::Infallible> = try_wait_until(policy, || Ok(done()), progress, sleep);
    let Ok(()) = r;
}

/// The one waiting loop every wait in hwbarr goes through (a barrier on
/// the device, point-to-point operations, a blocking barrier queued behind
/// non-blocking ones), the device barrier after its first polls
/// (`after_arrival`). Polls `done` until it is true or fails. Between
/// rounds of `spins` polls it calls `progress` (Open MPI's progress engine,
/// so that a peer's pending point-to-point traffic completes while we
/// wait; see `Turn`; not in the policy's first `quiet` rounds), then
/// yields the core or calls
/// `sleep` as the policy says: a `Sleep` waiter sleeps after its first
/// `YIELDS_BEFORE_SLEEP` rounds and `YIELD_BEFORE_SLEEP` of yields. One
/// whose progress did work yields instead of sleeping for the next
/// `LONG_WAIT_POLLS` polls (`AWAKE_AFTER_LONG_TURN` after a 4.1 turn that
/// only took long): a peer that needs its progress (a rendezvous, a
/// one-sided operation it is the target of) takes its next step within a
/// round, not after a sleep.
pub fn try_wait_until<E>(
    policy: WaitPolicy,
    done: impl FnMut() -> Result<bool, E>,
    progress: impl FnMut() -> Turn,
    sleep: impl FnMut(),
) -> Result<(), E> {
    wait_by(|| policy, 0, done, progress, sleep)
}

/// `try_wait_until` for a wait whose caller made its first `made` rounds
/// as bare rounds (`bare_rounds`: one poll and the policy's idle step each,
/// no progress turn): the loop counts its rounds and polls on from them.
pub fn try_wait_after<E>(
    policy: WaitPolicy,
    made: u32,
    done: impl FnMut() -> Result<bool, E>,
    progress: impl FnMut() -> Turn,
    sleep: impl FnMut(),
) -> Result<(), E> {
    wait_by(|| policy, made, done, progress, sleep)
}

/// The loop of `try_wait_until`, with the policy of each round from
/// `choose`, after `made` rounds of one poll each made by the caller.
fn wait_by<E>(
    choose: impl FnMut() -> WaitPolicy,
    made: u32,
    done: impl FnMut() -> Result<bool, E>,
    progress: impl FnMut() -> Turn,
    sleep: impl FnMut(),
) -> Result<(), E> {
    // The unit tests count naps round by round; `yield_before_sleep_is_timed`
    // tests the time.
    let yield_first = if cfg!(test) { Duration::ZERO } else { YIELD_BEFORE_SLEEP };
    wait_by_with(&CONTENTION, choose, made, done, progress, sleep, yield_first)
}

/// `wait_by` with the finding `contention` (the process's, or a test's)
/// and a `Sleep` waiter's time of yields before it sleeps (`yield_first`,
/// after its `YIELDS_BEFORE_SLEEP` rounds).
fn wait_by_with<E>(
    contention: &Contention,
    mut choose: impl FnMut() -> WaitPolicy,
    made: u32,
    mut done: impl FnMut() -> Result<bool, E>,
    mut progress: impl FnMut() -> Turn,
    mut sleep: impl FnMut(),
    yield_first: Duration,
) -> Result<(), E> {
    let mut rounds = made;
    let mut polls = u64::from(made);
    // Polls up to which a `Sleep` waiter stays awake after progress did
    // work or took long.
    let mut awake_until = 0u64;
    // This wait counted against the finding's term.
    let mut counted = false;
    // When a `Sleep` waiter first could have slept (read only then).
    let mut could_sleep: Option<Instant> = None;
    loop {
        rounds = rounds.saturating_add(1);
        let mut policy = choose();
        // A core found shared (`contention`): give it up, counting one look
        // per wait against the finding's term.
        if policy.adapts && contention.shared() && (counted || contention.look()) {
            counted = true;
            policy = policy.given_up();
        }
        let long = polls > LONG_WAIT_POLLS && policy.progress;
        let spins = if long { 1 } else { policy.spins };
        polls = polls.saturating_add(u64::from(spins));
        for i in 1..=spins {
            if done()? {
                return Ok(());
            }
            // A pause between two polls; after the round's last one come a
            // progress turn or the hand-off of the core, which it delays.
            if i < spins {
                std::hint::spin_loop();
            }
        }
        if policy.progress && rounds > policy.quiet {
            let turn = progress();
            match turn {
                Turn::Worked => awake_until = polls.saturating_add(LONG_WAIT_POLLS),
                Turn::TookLong => awake_until = awake_until.max(polls.saturating_add(AWAKE_AFTER_LONG_TURN)),
                Turn::Idle | Turn::IdleYield => {}
            }
            if done()? {
                return Ok(());
            }
            if turn == Turn::IdleYield {
                // The engine's yield, then a look before the policy's own
                // idle step: others ran meanwhile and may have released us.
                tell_yield(contention, policy);
                if done()? {
                    return Ok(());
                }
            }
        }
        match policy.idle {
            Idle::Spin if long => tell_yield(contention, policy),
            Idle::Spin => {}
            Idle::Yield => std::thread::yield_now(),
            Idle::Sleep if rounds <= YIELDS_BEFORE_SLEEP || polls < awake_until => std::thread::yield_now(),
            Idle::Sleep
                if !yield_first.is_zero() && could_sleep.get_or_insert_with(Instant::now).elapsed() < yield_first =>
            {
                std::thread::yield_now()
            }
            Idle::Sleep => sleep(),
        }
    }
}

/// A waiter's yield; one whose policy adapts also tells `contention`
/// whether it handed the core to another task. A spinning waiter yields
/// only after the engine's idle turn (4.1 under `mpi_yield_when_idle`) and
/// once its wait is long: where the core is its own, nobody else is ready
/// to run then.
fn tell_yield(contention: &Contention, policy: WaitPolicy) {
    if policy.adapts && policy.keeps_core() {
        contention.yielded(contention::yield_and_tell(), contention::step_aside);
    } else {
        std::thread::yield_now();
    }
}

/// When a polled rank whose barrier is in flight (MPI_Ibarrier, the
/// persistent barrier, tested in progress passes) reads for its leaders
/// (`polled::help`). By time, not by tests alone: a test comes every 30-55
/// ns from a tight MPI_Wait (measured here), every few µs from an
/// oversubscribed one that yields per pass, once per compute chunk from an
/// overlap loop: a fixed count of 256 tests would be 8-14 µs in the first
/// and about 920 µs in the second (the `absent` check at 4 ranks on 2
/// cores). A barrier whose leaders are in MPI is over long before
/// `HELP_WAIT` (helpers read every leader's lines, so they stay off its
/// way); one whose leader computes completes soon after it, and help
/// repeats every `HELP_AGAIN` while the barrier stays in flight.
///
/// The clock costs 20-50 ns a reading, so a tight loop reads it once in
/// `HELP_CHECK_EVERY` tests and never in a barrier's first ones (where a
/// fast barrier completes): there the first help comes at the first 8th
/// test `HELP_WAIT` after the 8th. A loop whose tests came `SLOW_TEST` or
/// more apart (found at a reading) reads the clock at every test from then
/// on, the next barriers' first tests included, until a reading finds
/// tests coming faster (a loop whose barriers all end at their first test
/// pays one reading each until then): its helps come at the first test
/// `HELP_WAIT` after the barrier's first test, then at the first test
/// `HELP_AGAIN` after the end of the last help.
///
/// On a cache line of its own: it is written at every test, beside fields
/// that other threads read.
#[repr(align(128))]
pub struct HelpPace {
    /// Count of the barrier being tested, and this process's tests of it.
    testing: AtomicU32,
    tests: AtomicU32,
    /// Nanoseconds (`now_ns`) from which the wait for help runs: the
    /// barrier's first clock reading, or `HELP_WAIT - HELP_AGAIN` before
    /// the end of its last help.
    mark: AtomicU64,
    /// The last clock reading, and the test count at it.
    read_at: AtomicU64,
    read_test: AtomicU32,
    /// Tests came `SLOW_TEST` or more apart at the last reading.
    slow: AtomicBool,
    /// The barrier whose `mark` is set.
    marked: AtomicU32,
}

/// Tests between two clock readings in a tight loop.
pub const HELP_CHECK_EVERY: u32 = 8;
/// Time in flight, from the first clock reading, before the first help.
pub const HELP_WAIT: Duration = Duration::from_micros(8);
/// Time between two helps.
pub const HELP_AGAIN: Duration = Duration::from_micros(2);
/// Tests this far apart or more make a loop slow: a clock reading costs
/// little beside them.
pub const SLOW_TEST: Duration = Duration::from_nanos(250);
const _: () = assert!(HELP_AGAIN.as_nanos() < HELP_WAIT.as_nanos());

impl HelpPace {
    pub const fn new() -> HelpPace {
        HelpPace {
            testing: AtomicU32::new(0),
            tests: AtomicU32::new(0),
            mark: AtomicU64::new(0),
            read_at: AtomicU64::new(0),
            read_test: AtomicU32::new(0),
            slow: AtomicBool::new(false),
            marked: AtomicU32::new(0),
        }
    }

    /// Counts one more test of the barrier whose count is `barrier` and
    /// says whether to help now (the caller then calls `helped` once its
    /// help is over); `now` (nanoseconds, monotonic) is called only at the
    /// tests that read the clock. Plain loads and stores, no
    /// locked instruction: a test is tens of ns, and threads racing here
    /// only move a help a little.
    pub fn due(&self, barrier: u32, now: impl FnOnce() -> u64) -> bool {
        let n = if self.testing.load(Relaxed) == barrier { self.tests.load(Relaxed).wrapping_add(1) } else { 1 };
        self.testing.store(barrier, Relaxed);
        self.tests.store(n, Relaxed);
        let slow = self.slow.load(Relaxed);
        if !slow && !n.is_multiple_of(HELP_CHECK_EVERY) {
            return false;
        }
        let t = now();
        // A barrier's first reading sets its mark: at its first test when
        // the loop is slow, else at its 8th, unless its first test did.
        let first = n == 1 || (!slow && n == HELP_CHECK_EVERY && self.marked.load(Relaxed) != barrier);
        if !first {
            // Time per test since the last reading, tests counted since.
            let tests = u64::from(n.wrapping_sub(self.read_test.load(Relaxed)).max(1));
            let apart = t.saturating_sub(self.read_at.load(Relaxed)) / tests;
            self.slow.store(apart >= SLOW_TEST.as_nanos() as u64, Relaxed);
        }
        self.read_at.store(t, Relaxed);
        self.read_test.store(n, Relaxed);
        if first {
            self.mark.store(t, Relaxed);
            self.marked.store(barrier, Relaxed);
            return false;
        }
        t.saturating_sub(self.mark.load(Relaxed)) >= HELP_WAIT.as_nanos() as u64
    }

    /// A help that `due` asked for ended at `t` (nanoseconds): the next is
    /// `HELP_AGAIN` from here, and the time the help took does not count
    /// as time between tests (it would make a tight loop look slow).
    pub fn helped(&self, t: u64) {
        self.read_at.store(t, Relaxed);
        self.read_test.store(self.tests.load(Relaxed), Relaxed);
        self.mark.store(t.saturating_sub((HELP_WAIT - HELP_AGAIN).as_nanos() as u64), Relaxed);
    }
}

impl Default for HelpPace {
    fn default() -> HelpPace {
        HelpPace::new()
    }
}

/// Monotonic nanoseconds since this process first asked.
pub fn now_ns() -> u64 {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    EPOCH.elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Progress passes count as long after as many idle passes as a
    /// blocking wait polls before it counts as long.
    #[test]
    fn passes_and_waits_count_as_long_alike() {
        assert_eq!(crate::contention::LONG_IDLE_PASSES, LONG_WAIT_POLLS);
    }

    /// The automatic own-core policy adapts to a core found shared; a
    /// policy the user set, or one for cores shared by count, does not.
    #[test]
    fn only_the_automatic_own_core_policy_adapts() {
        let own = WaitPolicy::for_node(2, 2, false, -1, None);
        assert!(own.adapts && own.keeps_core());
        let given = own.given_up();
        assert_eq!((given.spins, given.idle, given.progress), (1, Idle::Yield, true));
        assert_eq!(given.quiet, YIELDS_BEFORE_SLEEP, "no progress turn in the first rounds once given up");
        assert!(WaitPolicy::for_node(2, 2, false, 64, None).adapts, "spin set, idle automatic");
        for p in [
            WaitPolicy::for_node(2, 2, false, -1, Some(Idle::Spin)),
            WaitPolicy::for_node(3, 2, false, -1, None),
            WaitPolicy::for_node(2, 2, true, -1, None),
            WaitPolicy::TURN_PROGRESS,
        ] {
            assert!(!p.adapts && p.given_up() == p, "{p:?}");
        }
    }

    /// A wait whose policy adapts, while the core is found shared, polls
    /// once a round and yields, turns no progress in its first rounds and
    /// never sleeps, and counts one look per wait against the finding's
    /// term; while not, it keeps spinning; a policy that does not adapt
    /// is not touched either way.
    #[test]
    fn a_wait_gives_a_core_found_shared_up() {
        // (progress turns, naps) of a wait released at its `need + 1`-th poll.
        let run = |c: &Contention, p: WaitPolicy, need: u64| counted_with(c, p, need, |_| Turn::Idle);
        let own = WaitPolicy::for_node(2, 2, false, -1, None);
        let shared = Contention::new();
        (0..3).for_each(|_| {
            shared.yielded(true, |_| contention::Aside::Nowhere);
        });
        assert!(shared.shared());
        // One poll a round and a yield, no turn in the 3 quiet rounds; then
        // each round polls, turns progress and looks again before it
        // yields: the 21st poll comes right after the 9th turn.
        assert_eq!(YIELDS_BEFORE_SLEEP, 3);
        assert_eq!(run(&shared, own, 20), (9, 0));
        let left = |c: &Contention| (0..).take_while(|_| c.look()).count() as u32;
        let counted = Contention::new();
        (0..3).for_each(|_| {
            counted.yielded(true, |_| contention::Aside::Nowhere);
        });
        run(&counted, own, 20);
        run(&counted, own, 20);
        assert_eq!(left(&counted), crate::contention::SHARED_LOOKS - 2, "one look per wait");
        // Not found shared: 256 polls before the first turn.
        assert_eq!(run(&Contention::new(), own, 20), (0, 0));
        // The user's spin is kept, found shared or not.
        let told = WaitPolicy::for_node(2, 2, false, -1, Some(Idle::Spin));
        assert_eq!(run(&shared, told, 20), (0, 0));
        // A sleeping policy (cores shared by count) sleeps as before.
        let by_count = WaitPolicy::for_node(4, 2, false, -1, None);
        let (_, naps) = run(&shared, by_count, 20);
        assert!(naps > 0);
    }

    /// A blocking barrier's first round: never longer than the policy's
    /// own round or the crowd's, and none for a crowd or a shared core.
    #[test]
    fn the_first_round_is_bounded_by_every_policy() {
        let own = WaitPolicy::for_node(2, 2, false, -1, None);
        let shared = WaitPolicy::for_node(4, 2, false, -1, None);
        let user = WaitPolicy::for_node(2, 2, false, 5, None);
        assert_eq!((first_round(own, None), first_round(shared, None), first_round(user, None)), (SPINS_CROWDED, 0, 5));
        let crowd = Crowd::for_node(2, 2, false, -1, None, true);
        assert!(crowd.is_some());
        assert_eq!(first_round(own, crowd), 0);
    }

    /// Waits with `p` until the condition has been polled `need` times
    /// (it holds at the next poll); `work(k)`: whether the k-th progress
    /// turn (from 1) did work. Returns (turns, naps).
    fn counted_wait(p: WaitPolicy, need: u64, mut work: impl FnMut(u64) -> bool) -> (u64, u64) {
        counted_with(&CONTENTION, p, need, |k| if work(k) { Turn::Worked } else { Turn::Idle })
    }

    /// `counted_wait` with the finding `c`, the k-th progress turn going as
    /// `turn(k)` says, and no time of yields before a sleep.
    fn counted_with(c: &Contention, p: WaitPolicy, need: u64, mut turn: impl FnMut(u64) -> Turn) -> (u64, u64) {
        let (mut polls, mut turns, mut naps) = (0u64, 0u64, 0u64);
        let r: Result<(), ()> = wait_by_with(
            c,
            || p,
            0,
            || {
                polls += 1;
                Ok(polls > need)
            },
            || {
                turns += 1;
                turn(turns)
            },
            || naps += 1,
            Duration::ZERO,
        );
        r.unwrap();
        assert_eq!(polls, need + 1, "the wait ends at the first poll that holds");
        (turns, naps)
    }

    #[test]
    fn policy_follows_facts_unless_set() {
        assert_eq!(WaitPolicy::for_node(4, 2, false, -1, None).idle, Idle::Sleep);
        assert_eq!(WaitPolicy::for_node(2, 2, false, -1, None).idle, Idle::Spin);
        assert_eq!(WaitPolicy::for_node(2, 2, true, -1, None).idle, Idle::Yield);
        assert_eq!(WaitPolicy::for_node(4, 2, true, -1, Some(Idle::Spin)).idle, Idle::Spin);
        let p = WaitPolicy::for_node(2, 2, false, 0, None);
        assert!(!p.progress && p.spins > 0);
        assert_eq!(WaitPolicy::for_node(2, 2, false, 7, None).spins, 7);
        // Cores shared (oversubscribed, or mpi_yield_when_idle): poll once.
        assert_eq!(WaitPolicy::for_node(4, 2, false, -1, None).spins, 1);
        assert_eq!(WaitPolicy::for_node(2, 2, true, -1, None).spins, 1);
        assert_eq!(WaitPolicy::for_node(2, 2, false, -1, None).spins, SPINS_OWN_CORE);
    }

    #[test]
    fn crowd_only_when_threads_may_outnumber_own_cores() {
        let c = Crowd::for_node(2, 2, false, -1, None, true).expect("threaded, a core each");
        assert_eq!(c.above, 1);
        assert_eq!(
            c.policy,
            WaitPolicy { spins: SPINS_CROWDED, progress: true, idle: Idle::Yield, quiet: 0, adapts: false }
        );
        assert_eq!(Crowd::for_node(1, 8, false, -1, None, true).map(|c| c.above), Some(8));
        assert_eq!(Crowd::for_node(2, 2, false, -1, None, false), None);
        // Cores shared already, or the user chose: nothing changes.
        assert_eq!(Crowd::for_node(4, 2, false, -1, None, true), None);
        assert_eq!(Crowd::for_node(2, 2, true, -1, None, true), None);
        assert_eq!(Crowd::for_node(2, 2, false, 256, None, true), None);
        assert_eq!(Crowd::for_node(2, 2, false, -1, Some(Idle::Spin), true), None);
    }

    #[test]
    fn a_crowded_wait_takes_the_crowd_policy_and_counts_itself() {
        let _only = crowd_test_lock();
        let own = WaitPolicy { spins: 4, progress: true, idle: Idle::Spin, quiet: 0, adapts: false };
        let yielding = WaitPolicy { spins: 2, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false };
        let run = |above: usize| {
            let (mut polls, mut naps) = (0, 0);
            let crowd = Crowd { above, policy: yielding };
            let r: Result<(), ()> = try_wait_crowded(
                own,
                crowd,
                || {
                    polls += 1;
                    Ok(polls > 4 * (YIELDS_BEFORE_SLEEP as usize + 3))
                },
                || Turn::Idle,
                || naps += 1,
            );
            r.unwrap();
            naps
        };
        // Never more waiters than `above`: the own-core policy, no sleep.
        assert_eq!(run(usize::MAX), 0);
        // More than 0 (this one): every round crowded, 3 polls each (2, and
        // one after progress), and after its rounds of yield it sleeps.
        let full_rounds = 4 * (YIELDS_BEFORE_SLEEP + 3) / 3;
        assert_eq!(run(0), full_rounds - YIELDS_BEFORE_SLEEP);
        assert_eq!(WAITING.load(Relaxed), 0, "the waiter counted itself out");
    }

    /// A spinning waiter never sleeps (its peers may need its progress);
    /// after a long wait it turns progress after every poll.
    #[test]
    fn a_long_wait_turns_progress_after_every_poll_and_never_sleeps() {
        for idle in [Idle::Spin, Idle::Yield] {
            let p = WaitPolicy { spins: 256, progress: true, idle, quiet: 0, adapts: false };
            let wait = |need| counted_wait(p, need, |_| false);
            // A barrier whose peers run: a turn per 256 polls (and one
            // more poll after each turn).
            let short = LONG_WAIT_POLLS / 2;
            assert_eq!(wait(short), (short / 257, 0), "{idle:?}");
            // Past the limit: a turn after every poll (each round: one
            // poll, the turn, one more poll), never a nap.
            let rounds_to_long = LONG_WAIT_POLLS / 256 + 1;
            let extra = 300;
            let (turns, naps) = wait(rounds_to_long * 257 + 2 * extra);
            assert_eq!(naps, 0, "{idle:?}");
            assert_eq!(turns, rounds_to_long + extra, "{idle:?}");
        }
    }

    /// After its rounds of yield a `Sleep` waiter keeps yielding until
    /// `yield_first` has passed, then sleeps each round; with none it
    /// sleeps at once (as the other unit tests wait).
    #[test]
    fn yield_before_sleep_is_timed() {
        let p = WaitPolicy { spins: 1, progress: false, idle: Idle::Sleep, quiet: 0, adapts: false };
        // (rounds yielded after the first 3, naps) of a wait that ends
        // after `after` has passed and 5 more naps.
        let run = |yield_first: Duration, after: Duration| {
            let start = Instant::now();
            let (mut polls, mut naps, mut awake) = (0u64, 0u64, 0u64);
            let naps_seen = std::cell::Cell::new(0u64);
            let r: Result<(), ()> = wait_by_with(
                &Contention::new(),
                || p,
                0,
                || {
                    polls += 1;
                    if polls > u64::from(YIELDS_BEFORE_SLEEP) && naps_seen.get() == 0 {
                        awake += 1;
                    }
                    Ok(start.elapsed() >= after && naps_seen.get() >= 5)
                },
                || Turn::Idle,
                || {
                    naps += 1;
                    naps_seen.set(naps);
                },
                yield_first,
            );
            r.unwrap();
            (start.elapsed(), awake, naps)
        };
        let (took, awake, naps) = run(Duration::from_millis(20), Duration::ZERO);
        assert!(took >= Duration::from_millis(20), "slept before its time: {took:?}");
        assert!(awake > 1 && naps == 5, "{awake} rounds awake, {naps} naps");
        let (_, awake, naps) = run(Duration::ZERO, Duration::ZERO);
        assert_eq!((awake, naps), (1, 5), "no time to yield: the first round after the 3 sleeps");
        assert_eq!(YIELD_BEFORE_SLEEP, Duration::from_micros(50));
    }

    /// A sleeping waiter whose progress turn only took long (4.1) stays
    /// awake for the next `AWAKE_AFTER_LONG_TURN` polls, not for
    /// `LONG_WAIT_POLLS`: 4.1's periodic polls of its event loop would
    /// otherwise keep it awake for good.
    #[test]
    fn a_long_turn_keeps_a_sleeper_awake_briefly() {
        // Naps of a wait of 2 × 2 × LONG_WAIT_POLLS polls whose `turn(k)`-th
        // progress turn went as it says.
        let naps_with = |turn: fn(u64) -> Turn| {
            let p = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false };
            counted_with(&Contention::new(), p, 2 * (2 * LONG_WAIT_POLLS), turn).1
        };
        let rounds = 2 * LONG_WAIT_POLLS;
        let naps = naps_with(|k| if k == 10 { Turn::TookLong } else { Turn::Idle });
        // As in the test below, with the rounds after the 10th turn awake
        // for AWAKE_AFTER_LONG_TURN polls (one a round) instead.
        assert_eq!(naps, rounds - u64::from(YIELDS_BEFORE_SLEEP) - AWAKE_AFTER_LONG_TURN, "{naps} in {rounds} rounds");
        // A long turn inside a counted turn's window does not shorten it.
        let naps = naps_with(|k| match k {
            10 => Turn::Worked,
            20 => Turn::TookLong,
            _ => Turn::Idle,
        });
        assert_eq!(naps, rounds - u64::from(YIELDS_BEFORE_SLEEP) - LONG_WAIT_POLLS, "{naps} in {rounds} rounds");
    }

    /// A sleeping waiter whose progress turn did work stays awake
    /// (yielding) for the next `LONG_WAIT_POLLS` polls, then sleeps again.
    #[test]
    fn a_sleeper_stays_awake_while_progress_does_work() {
        let p = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false };
        // Work done in the 10th turn only; released after 2 × LONG_WAIT_POLLS rounds.
        let need = 2 * (2 * LONG_WAIT_POLLS);
        let (_, naps) = counted_wait(p, need, |turn| turn == 10);
        // Each round polls twice (before and after its turn). Rounds 4-9
        // sleep (after 3 of yield); the 10th turn's work keeps rounds 10 to
        // 10 + LONG_WAIT_POLLS - 1 awake; every round after sleeps, but the
        // last, which ends at its first poll.
        let rounds = need / 2;
        assert_eq!(naps, rounds - u64::from(YIELDS_BEFORE_SLEEP) - LONG_WAIT_POLLS, "{naps} naps in {rounds} rounds");
    }

    #[test]
    fn progress_turns_while_waiting() {
        let p = WaitPolicy { spins: 4, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false };
        // 11 polls: two rounds of 4 and a poll after each turn, then one.
        let (turns, naps) = counted_wait(p, 10, |_| false);
        assert_eq!(turns, 2);
        assert_eq!(naps, 2_u64.saturating_sub(u64::from(YIELDS_BEFORE_SLEEP)));

        // A longer wait: after its rounds of yield, a waiter sleeps each round.
        let rounds = u64::from(YIELDS_BEFORE_SLEEP) + 2;
        let (_, naps) = counted_wait(p, rounds * 5, |_| false);
        assert_eq!(naps, rounds - u64::from(YIELDS_BEFORE_SLEEP));
    }

    /// On the device a waiter that gives its core up turns no progress in
    /// its first `YIELDS_BEFORE_SLEEP` rounds (one poll each), then one turn
    /// a round as before; one that keeps its core is unchanged.
    #[test]
    fn a_device_wait_of_a_shared_core_starts_quiet() {
        let quiet = u64::from(YIELDS_BEFORE_SLEEP);
        for idle in [Idle::Yield, Idle::Sleep] {
            let p = WaitPolicy { spins: 1, progress: true, idle, quiet: 0, adapts: false }.on_device();
            assert_eq!(p.quiet, YIELDS_BEFORE_SLEEP);
            // Released at the quiet rounds' last poll: no turn, no sleep.
            assert_eq!(counted_wait(p, quiet - 1, |_| false), (0, 0), "{idle:?}");
            // Then a turn per round, each round polling before and after
            // it, and a sleeper sleeps after each of those 5 turns (never
            // before its first); the next round ends at its first poll.
            let naps = if idle == Idle::Sleep { 5 } else { 0 };
            assert_eq!(counted_wait(p, quiet + 2 * 5, |_| false), (5, naps), "{idle:?}");
        }
        let own = WaitPolicy::for_node(2, 2, false, -1, None);
        assert_eq!(own.on_device(), own);
        assert_eq!(counted_wait(own.on_device(), SPINS_OWN_CORE as u64, |_| false).0, 1);
    }

    /// A device barrier's bare rounds are the quiet rounds of a waiter
    /// that polls once a round, gives its core up and waits alone, never
    /// more than its yields before a sleep; none otherwise.
    #[test]
    fn bare_rounds_are_the_quiet_rounds_of_a_lone_yielding_waiter() {
        let shared = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false }.on_device();
        let own = WaitPolicy::for_node(2, 2, false, -1, None).on_device();
        let crowd = Some(Crowd { above: 2, policy: shared });
        assert_eq!(bare_rounds(shared, None), YIELDS_BEFORE_SLEEP);
        assert_eq!(bare_rounds(WaitPolicy { idle: Idle::Yield, ..shared }, None), YIELDS_BEFORE_SLEEP);
        assert_eq!(bare_rounds(WaitPolicy { quiet: 10, ..shared }, None), YIELDS_BEFORE_SLEEP);
        assert_eq!(bare_rounds(own, None), 0);
        assert_eq!(bare_rounds(shared, crowd), 0);
        assert_eq!(bare_rounds(WaitPolicy { spins: 5, ..shared }, None), 0);
        assert_eq!(bare_rounds(WaitPolicy { quiet: 0, ..shared }, None), 0);
    }

    /// What a device barrier's wait does after its arrival, before the
    /// general loop: the polls it makes, and the rounds it tells the loop
    /// were made; it ends at a poll that holds or fails, without the loop.
    #[test]
    fn after_arrival_polls_then_hands_the_rounds_made_to_the_loop() {
        let shared = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false }.on_device();
        let own = WaitPolicy::for_node(2, 2, false, -1, None).on_device();
        let crowd = Some(Crowd { above: 2, policy: shared });
        // (polls before the loop, rounds made), or None if the loop never ran.
        let run = |p: WaitPolicy, crowd: Option<Crowd>, end: Option<(u32, Result<bool, ()>)>| {
            let mut polls = 0u32;
            let mut made = None;
            let r = after_arrival(
                p,
                crowd,
                || {
                    polls += 1;
                    match end {
                        Some((at, r)) if at == polls => r,
                        _ => Ok(false),
                    }
                },
                |m| {
                    made = Some(m);
                    Ok(())
                },
            );
            (r, polls, made)
        };
        assert_eq!(run(shared, None, None), (Ok(()), YIELDS_BEFORE_SLEEP, Some(YIELDS_BEFORE_SLEEP)));
        assert_eq!(run(own, None, None), (Ok(()), SPINS_CROWDED, Some(0)));
        assert_eq!(run(shared, crowd, None), (Ok(()), 0, Some(0)));
        assert_eq!(run(WaitPolicy { spins: 5, ..shared }, None, None), (Ok(()), 5, Some(0)));
        assert_eq!(run(shared, None, Some((2, Ok(true)))), (Ok(()), 2, None));
        assert_eq!(run(shared, None, Some((3, Err(())))), (Err(()), 3, None));
        assert_eq!(run(own, None, Some((16, Err(())))), (Err(()), 16, None));
    }

    /// A start's window: at most `START_POLLS` polls where the rank keeps
    /// its core (and polls pay), `START_YIELDS` rounds of a yield and a
    /// poll where it gives its core up, none for a crowd of threads or a
    /// rank that keeps its core but polls once a round; a window that sees
    /// no release has the next 1, 2, 4 ... 64 starts skip theirs, one that
    /// sees it ends the skipping; an error ends a window as it is.
    #[test]
    fn a_start_polls_briefly_and_backs_off_while_peers_come_late() {
        let shared = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false }.on_device();
        let own = WaitPolicy::for_node(2, 2, false, -1, None);
        let crowd = Some(Crowd { above: 2, policy: shared });
        // (outcome, polls made) of a start whose `at`-th poll gives `end`.
        let start = |w: &StartWindow, p: WaitPolicy, crowd: Option<Crowd>, end: Option<(u32, Result<bool, ()>)>| {
            let mut polls = 0u32;
            let r = w.poll(p, crowd, true, || {
                polls += 1;
                match end {
                    Some((at, r)) if at == polls => r,
                    _ => Ok(false),
                }
            });
            (r, polls)
        };
        for (p, c) in [(shared, crowd), (own, crowd), (WaitPolicy { spins: 1, ..own }, None)] {
            assert_eq!(start(&StartWindow::default(), p, c, None), (Ok(false), 0), "{p:?} {c:?}");
        }
        assert_eq!(Window::of(own, None, false), Window::None, "polls only where they pay");
        assert_eq!(Window::of(own, None, true), Window::Polls(START_POLLS));
        assert_eq!(Window::of(shared, None, false), Window::Yields(START_YIELDS));
        assert_eq!(start(&StartWindow::default(), shared, None, None), (Ok(false), START_YIELDS));
        let w = StartWindow::default();
        assert_eq!(start(&w, own, None, Some((3, Ok(true)))), (Ok(true), 3));
        assert_eq!(start(&w, own, None, Some((START_POLLS, Ok(true)))), (Ok(true), START_POLLS));
        // Late peers: each window that misses doubles the starts skipped,
        // up to START_SKIP_MAX.
        let polls: Vec<u32> = (0..400).map(|_| start(&w, own, None, None).1).collect();
        let mut expected = Vec::new();
        for skip in [1, 2, 4, 8, 16, 32, 64, 64, 64] {
            expected.push(START_POLLS);
            expected.extend(std::iter::repeat_n(0, skip));
        }
        assert_eq!(polls[..expected.len()], expected[..]);
        // A window that sees the release ends the skipping: the next miss
        // skips one start again.
        let mut skips_left = 0;
        while start(&w, own, None, Some((1, Ok(true)))) == (Ok(false), 0) {
            skips_left += 1;
        }
        assert_eq!(start(&w, own, None, None), (Ok(false), START_POLLS));
        assert_eq!(start(&w, own, None, None), (Ok(false), 0));
        assert_eq!(start(&w, own, None, None), (Ok(false), START_POLLS));
        // The counts of the verbose report: windows made (the 2 first, the
        // 400 starts', the loop's last, 2 after), seen (3), skipped.
        let windows = polls.iter().filter(|&&p| p > 0).count() as u64;
        let c = w.counts();
        assert_eq!(c, WindowCounts { made: 2 + windows + 1 + 2, seen: 3, skipped: 400 - windows + skips_left + 1 });
        assert_eq!((windows, skips_left), (12, 59), "the backoff's sequence over 400 starts");
        let w = StartWindow::default();
        assert_eq!(start(&w, own, None, Some((2, Err(())))), (Err(()), 2));
        assert_eq!(start(&w, own, None, Some((1, Ok(true)))), (Ok(true), 1), "an error sets no skip");
    }

    /// One step of a traced wait.
    #[derive(Debug, PartialEq)]
    enum Step {
        Poll,
        Turn,
        Nap,
    }

    /// The polls, turns and sleeps of a wait by `p` whose `need + 1`-th
    /// poll holds (or fails, `fail`), whose `worked`-th turn did work: the
    /// whole wait in the general loop, or `made.0` polls first (as
    /// `after_arrival`'s bare rounds make them) and the loop told that
    /// `made.1` rounds were made.
    fn traced(
        p: WaitPolicy,
        made: Option<(u32, u32)>,
        need: u32,
        fail: bool,
        worked: u32,
    ) -> (Result<(), ()>, Vec<Step>) {
        use std::cell::RefCell;
        let log = RefCell::new(Vec::new());
        let polls = RefCell::new(0u32);
        let done = || {
            log.borrow_mut().push(Step::Poll);
            *polls.borrow_mut() += 1;
            if *polls.borrow() > need {
                if fail {
                    Err(())
                } else {
                    Ok(true)
                }
            } else {
                Ok(false)
            }
        };
        let mut turns = 0;
        let progress = || {
            log.borrow_mut().push(Step::Turn);
            turns += 1;
            if turns == worked {
                Turn::Worked
            } else {
                Turn::Idle
            }
        };
        let sleep = || log.borrow_mut().push(Step::Nap);
        let r = match made {
            None => try_wait_until(p, done, progress, sleep),
            Some((polled, told)) => (|| {
                for _ in 0..polled {
                    if done()? {
                        return Ok(());
                    }
                }
                try_wait_after(p, told, done, progress, sleep)
            })(),
        };
        (r, log.into_inner())
    }

    /// The bare rounds and the loop counting on from them poll, turn
    /// progress and sleep exactly as the whole wait in the loop does, for
    /// every policy that makes bare rounds, whether a turn did work or not,
    /// and whether the wait ends or fails.
    #[test]
    fn bare_rounds_and_the_loop_after_them_trace_as_the_whole_loop() {
        for idle in [Idle::Yield, Idle::Sleep] {
            for progress in [true, false] {
                let p = WaitPolicy { spins: 1, progress, idle, quiet: 0, adapts: false }.on_device();
                let made = bare_rounds(p, None);
                assert_eq!(made, YIELDS_BEFORE_SLEEP);
                for worked in [0, 1, 3] {
                    for need in 0..40 {
                        for fail in [false, true] {
                            let whole = traced(p, None, need, fail, worked);
                            let split = traced(p, Some((made, made)), need, fail, worked);
                            assert_eq!(split, whole, "{p:?} {worked} {need} {fail}");
                        }
                    }
                }
            }
        }
        // A loop not told of the rounds made, or told of rounds not made,
        // would not trace the same.
        let p = WaitPolicy { spins: 1, progress: true, idle: Idle::Sleep, quiet: 0, adapts: false }.on_device();
        let whole = traced(p, None, 12, false, 0);
        assert_ne!(traced(p, Some((3, 0)), 12, false, 0), whole);
        assert_ne!(traced(p, Some((0, 3)), 12, false, 0), whole);
    }

    /// Tests of one barrier, `step` ns apart from `t0`: the tests (1-based)
    /// at which `pace` helps, up to `tests`, and how often it read the clock.
    fn helps(pace: &HelpPace, barrier: u32, t0: u64, step: u64, tests: u32) -> (Vec<u32>, u32) {
        paced(pace, barrier, t0, tests, |_| step, 0)
    }

    /// As `helps`, with the gap before test k `step(k)` and each help
    /// taking `cost` ns, told to the pace as `tested` does.
    fn paced(
        pace: &HelpPace,
        barrier: u32,
        t0: u64,
        tests: u32,
        step: impl Fn(u32) -> u64,
        cost: u64,
    ) -> (Vec<u32>, u32) {
        let (mut t, mut reads, mut helped) = (t0, 0, Vec::new());
        for k in 1..=tests {
            t += step(k);
            if pace.due(barrier, || {
                reads += 1;
                t
            }) {
                helped.push(k);
                t += cost;
                pace.helped(t);
            }
        }
        (helped, reads)
    }

    /// A tight loop (a test every 30 ns): the first help once HELP_WAIT
    /// has passed since the 8th test, then one every HELP_AGAIN, the
    /// clock read once in 8 tests.
    #[test]
    fn a_tight_loop_helps_after_the_wait_and_then_every_again() {
        let pace = HelpPace::new();
        let (helped, reads) = helps(&pace, 5, 1_000_000, 30, 1000);
        assert_eq!(reads, 1000 / HELP_CHECK_EVERY);
        // 8 µs after test 8 (240 ns): test 275, rounded up to a multiple of 8.
        assert_eq!(helped.first(), Some(&280));
        // Then every 2 µs: 67 tests, rounded up to 72.
        assert!(helped.windows(2).all(|w| w[1] - w[0] == 72), "{helped:?}");
        assert_eq!(helped.len(), 11);
    }

    /// A slow loop (a test every 100 µs of computation, or a yield per
    /// pass): its first barrier helps at the second reading of the clock
    /// (the 16th test), which finds the loop slow, and then at every test;
    /// its next barrier at its second test.
    #[test]
    fn a_slow_loop_helps_from_its_second_reading_and_then_at_every_test() {
        let pace = HelpPace::new();
        let (helped, reads) = helps(&pace, 5, 0, 100_000, 40);
        assert_eq!(helped, (16..=40).collect::<Vec<_>>());
        assert_eq!(reads, 2 + 24);
        let (helped, reads) = helps(&pace, 6, 10_000_000, 100_000, 5);
        assert_eq!((helped, reads), (vec![2, 3, 4, 5], 5));
    }

    /// A loop that turns fast again reads the clock once in 8 tests again
    /// from its second test, and waits HELP_WAIT from its first (the
    /// barrier's first reading).
    #[test]
    fn a_loop_that_turns_fast_reads_the_clock_seldom_again() {
        let pace = HelpPace::new();
        helps(&pace, 1, 0, 100_000, 20);
        let (helped, reads) = helps(&pace, 2, 10_000_000, 30, 1000);
        assert_eq!(reads, 2 + 1000 / HELP_CHECK_EVERY);
        // 8 µs after test 1 (30 ns): test 268, read at 272.
        assert_eq!(helped.first(), Some(&272));
    }

    /// A barrier over within its first tests never reads the clock; the
    /// next barrier starts its count afresh, and so does its wait.
    #[test]
    fn each_barrier_starts_afresh() {
        let pace = HelpPace::new();
        assert_eq!(helps(&pace, 1, 0, 30, 7), (vec![], 0));
        let (helped, _) = helps(&pace, 2, 0, 3_000, 16);
        assert_eq!(helped, vec![16]);
        // Barrier 3 starts at a later time, with tests 30 ns apart: its
        // first test reads the clock and sets the mark (the last loop was
        // slow), its second finds the loop fast.
        let (helped, reads) = helps(&pace, 3, 10_000_000, 30, 300);
        assert_eq!((helped, reads), (vec![272], 2 + 300 / HELP_CHECK_EVERY));
    }

    /// Around the line between fast and slow: 50 and 200 ns a test read
    /// the clock once in 8 tests, 300 ns and 3 µs at every test once a
    /// second reading saw it.
    #[test]
    fn the_clock_is_read_at_every_test_only_in_slow_loops() {
        for (step, reads) in [(50, 25), (200, 25), (300, 2 + 184), (3_000, 2 + 184)] {
            let (_, r) = helps(&HelpPace::new(), 1, 0, step, 200);
            assert_eq!(r, reads, "{step} ns a test");
        }
    }

    /// A loop that slows down within a barrier reads at every test from
    /// the first reading that sees it, and is helped 2 µs apart.
    #[test]
    fn a_loop_that_slows_within_a_barrier_reads_at_every_test() {
        let pace = HelpPace::new();
        // 100 tests of 30 ns, then 3 µs each.
        let (helped, reads) = paced(&pace, 1, 0, 140, |k| if k <= 100 { 30 } else { 3_000 }, 0);
        // Readings at 8, 16, ..., 104 (13); the one at 104 sees 3 µs tests.
        assert_eq!(reads, 13 + 36);
        assert_eq!(helped.first(), Some(&104));
        assert!(helped.windows(2).all(|w| w[1] == w[0] + 1), "{helped:?}");
    }

    /// A barrier that began slow and was helped, whose loop then turns
    /// fast, is helped again HELP_AGAIN after that help, not HELP_WAIT
    /// after its 8th test.
    #[test]
    fn a_help_in_a_slow_start_is_not_forgotten_when_the_loop_turns_fast() {
        let pace = HelpPace::new();
        helps(&pace, 1, 0, 100_000, 20);
        // Barrier 2: first gap 10 µs (helped at test 2), then 30 ns.
        let (helped, _) = paced(&pace, 2, 10_000_000, 300, |k| if k <= 2 { 10_000 } else { 30 }, 0);
        assert_eq!(helped.first(), Some(&2));
        // 2 µs after test 2 at 30 ns a test: test 69, read at 72.
        assert_eq!(helped.get(1), Some(&72), "{helped:?}");
    }

    /// A help that takes long (2.5 µs, longer than HELP_AGAIN) in a tight
    /// loop neither makes the loop look slow nor brings the next help
    /// forward: the next comes HELP_AGAIN after it ended.
    #[test]
    fn a_long_help_counts_neither_as_test_time_nor_as_waiting() {
        let pace = HelpPace::new();
        let (helped, reads) = paced(&pace, 1, 0, 3000, |_| 30, 2_500);
        assert!(helped.windows(2).all(|w| w[1] - w[0] == 72), "{helped:?}");
        assert_eq!(reads, 3000 / HELP_CHECK_EVERY);
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = now_ns();
        std::thread::sleep(Duration::from_millis(1));
        assert!(now_ns() >= a + 1_000_000);
    }
}
