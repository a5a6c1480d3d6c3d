//! How a rank waits for a barrier to release it. The cores only poll; this
//! decides what to do between polls: spin while the releasing peer can run
//! on another core, and turn MPI progress and yield the core when ranks
//! outnumber cores (a spinning waiter would otherwise hold the very core
//! its releaser needs).

/// The waiting policy of one communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Polls between two turns of MPI progress.
    pub spins: u32,
    /// Turn MPI progress at all (off only to prove the deadlock test bites).
    pub progress: bool,
    /// Give the core away (sched_yield) after each round of polls.
    pub yield_core: bool,
}

impl WaitPolicy {
    /// Chooses from facts — ranks on this node against the cores online,
    /// Open MPI's `mpi_yield_when_idle` — unless the user set `spin`
    /// (polls per progress turn; 0 = never turn progress) or `yield_mode`
    /// (0 never, 1 always; negative = automatic).
    pub fn for_node(local_ranks: usize, cores: usize, yield_when_idle: bool, spin: i32, yield_mode: i32) -> WaitPolicy {
        let oversubscribed = local_ranks > cores;
        let auto_spins = if oversubscribed { 16 } else { 256 };
        WaitPolicy {
            spins: if spin > 0 { spin as u32 } else { auto_spins },
            progress: spin != 0,
            yield_core: match yield_mode {
                0 => false,
                m if m > 0 => true,
                _ => oversubscribed || yield_when_idle,
            },
        }
    }
}

/// Polls `done` until it is true. Between rounds of `spins` polls it calls
/// `progress` (Open MPI's progress engine, so that a peer's pending
/// point-to-point traffic completes while we wait) and yields the core if
/// the policy says so.
pub fn wait_until(policy: WaitPolicy, mut done: impl FnMut() -> bool, mut progress: impl FnMut()) {
    loop {
        for _ in 0..policy.spins {
            if done() {
                return;
            }
            std::hint::spin_loop();
        }
        if policy.progress {
            progress();
            if done() {
                return;
            }
        }
        if policy.yield_core {
            std::thread::yield_now();
        }
    }
}

/// Cores online on this machine (not the affinity mask: oversubscription is
/// about the machine, whatever a rank is bound to).
pub fn cores_online() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversubscription_yields() {
        assert!(WaitPolicy::for_node(4, 2, false, -1, -1).yield_core);
        assert!(!WaitPolicy::for_node(2, 2, false, -1, -1).yield_core);
        assert!(WaitPolicy::for_node(2, 2, true, -1, -1).yield_core);
        assert!(!WaitPolicy::for_node(4, 2, true, -1, 0).yield_core);
        let p = WaitPolicy::for_node(2, 2, false, 0, -1);
        assert!(!p.progress && p.spins > 0);
        assert_eq!(WaitPolicy::for_node(2, 2, false, 7, -1).spins, 7);
    }

    #[test]
    fn progress_turns_while_waiting() {
        let mut polls = 0;
        let mut turns = 0;
        let p = WaitPolicy { spins: 4, progress: true, yield_core: true };
        wait_until(p, || { polls += 1; polls > 10 }, || turns += 1);
        assert_eq!(polls, 11);
        assert_eq!(turns, 2);
    }
}
