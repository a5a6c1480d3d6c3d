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
//! a millisecond, per 100,000 waits). Only waits whose policy
//! was chosen automatically (`WaitPolicy::adapts`) take part; `idle spin`
//! set by the user is kept.
//!
//! Process-wide: the core is the process's, whichever communicator found
//! it shared. A heuristic, not a protocol: its counters are plain std
//! atomics (no loom model), and whatever it concludes only changes how a
//! rank waits, never whether a barrier is correct.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

pub use crate::shm::sched::yield_and_tell;

/// Score at which the core counts as shared.
pub const SHARE_SCORE: u32 = 6;
/// What a yield that switched to another task adds to the score.
const SWITCH_SCORE: u32 = 2;
/// Waits (those that get past their first polls) made with the core given
/// up before the process spins again and re-tests.
pub const SHARED_LOOKS: u32 = 100_000;

/// The process's finding.
pub struct Contention {
    score: AtomicU32,
    /// Looks left with the core given up (0: spin).
    left: AtomicU32,
    /// Whether the finding was reported once already.
    told: AtomicBool,
}

impl Contention {
    pub const fn new() -> Contention {
        Contention { score: AtomicU32::new(0), left: AtomicU32::new(0), told: AtomicBool::new(false) }
    }

    /// After a long wait's yield: whether it `switched` to another task.
    /// Returns true when this yield found the core shared.
    pub fn yielded(&self, switched: bool) -> bool {
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
        self.left.store(SHARED_LOOKS, Relaxed);
        true
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

    /// True once per process, the first time it is asked after the core
    /// was found shared (a load, and a swap only that once).
    pub fn first_finding(&self) -> bool {
        !self.told.load(Relaxed) && !self.told.swap(true, Relaxed)
    }
}

impl Default for Contention {
    fn default() -> Self {
        Contention::new()
    }
}

/// The process's finding, fed by `wait`'s long waits.
pub static CONTENTION: Contention = Contention::new();

#[cfg(test)]
mod tests {
    use super::*;

    /// Switching yields score the core shared; quiet yields between them
    /// pull the score down, so that a busy neighbour now and then does not.
    #[test]
    fn switches_find_the_core_shared_and_quiet_yields_do_not() {
        let c = Contention::new();
        assert!(!c.yielded(true) && !c.yielded(true));
        assert!(c.yielded(true), "three switches in a row: shared");
        assert!(c.shared());

        let c = Contention::new();
        for _ in 0..1000 {
            assert!(!c.yielded(false));
        }
        // A switch now and then among quiet yields (a daemon) never adds up.
        for i in 0..1000 {
            assert!(!c.yielded(i % 3 == 0), "at {i}");
        }
        assert!(!c.shared());
        // As often as beside a busy loop here (about 1 in 3, with quiet
        // yields between): the score still climbs.
        let c = Contention::new();
        let found = (0..200).any(|i| c.yielded(i % 3 != 2));
        assert!(found && c.shared());
    }

    /// The finding lasts `SHARED_LOOKS` looks, then the process spins again.
    #[test]
    fn the_finding_runs_out() {
        let c = Contention::new();
        assert!(!c.look());
        (0..3).for_each(|_| {
            c.yielded(true);
        });
        for i in 0..SHARED_LOOKS {
            assert!(c.look(), "look {i}");
        }
        assert!(!c.look() && !c.shared());
        assert!(c.first_finding() && !c.first_finding());
    }
}
