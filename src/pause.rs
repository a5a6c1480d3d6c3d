//! The gap between two polls of MPI_Barrier's line path, made of PAUSEs.
//!
//! At 2 ranks the line barrier runs at the floor when each line transfer
//! carries two barriers: the rank that completed a barrier is back with its
//! next arrival before its peer's look at the release takes the line away
//! (`core::line::peer_ahead`; `examples/line_gap`). A waiter that looks
//! again at once after each PAUSE (about 11 ns on a Xeon, 30-45 ns on
//! other cpus) takes the line away from a peer still on its way back
//! through MPI_Barrier, and the barrier pays extra transfers: 1.70x the
//! floor against 1.10x with a poll every 32-35 ns (3 PAUSEs), the same builds
//! interleaved (docs/benchmarks.md, "Two barriers per transfer"). The
//! PAUSE's cost differs by cpu, so the gap is timed, not counted.

use std::sync::OnceLock;
use std::time::Instant;

/// The time from one poll of MPI_Barrier's line path to the next, by
/// default (`coll_hwbarr_line_poll_gap`).
pub const LINE_POLL_GAP_NS: f64 = 32.0;

/// Most PAUSEs per poll (a cpu whose PAUSE is nearly free).
pub const MOST_PER_POLL: u32 = 64;

/// PAUSEs per timed run, and runs: about 1.5 µs a run at 11 ns a PAUSE,
/// 6 µs at 45 ns.
const PER_RUN: u32 = 128;
const RUNS: usize = 4;

/// ns one PAUSE takes on this cpu: the fastest of a few timed runs (one the
/// scheduler or an interrupt stretched reads long), timed once a process.
pub fn pause_ns() -> f64 {
    static NS: OnceLock<f64> = OnceLock::new();
    *NS.get_or_init(|| (0..RUNS).map(|_| timed_run()).fold(f64::INFINITY, f64::min))
}

fn timed_run() -> f64 {
    let t = Instant::now();
    for _ in 0..PER_RUN {
        std::hint::spin_loop();
    }
    t.elapsed().as_nanos() as f64 / f64::from(PER_RUN)
}

/// PAUSEs per poll that make a gap of `gap_ns` where one takes
/// `pause_ns`: at least one (the poll loop's own; a gap of 0 or less asks
/// for no more), at most `MOST_PER_POLL`.
pub fn per_poll(pause_ns: f64, gap_ns: f64) -> u32 {
    let n = gap_ns / pause_ns;
    if n.is_finite() && n > 0.0 {
        (n.round() as u32).clamp(1, MOST_PER_POLL)
    } else {
        1
    }
}

/// PAUSEs per poll of MPI_Barrier's line path on this cpu, for polls
/// `gap_ns` apart (`coll_hwbarr_line_poll_gap`, `LINE_POLL_GAP_NS` by
/// default). Times the PAUSE only for a gap above 0.
pub fn line_path(gap_ns: f64) -> u32 {
    if gap_ns > 0.0 {
        per_poll(pause_ns(), gap_ns)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_is_timed_in_pauses_and_bounded() {
        assert_eq!(per_poll(11.5, LINE_POLL_GAP_NS), 3);
        assert_eq!(per_poll(9.7, LINE_POLL_GAP_NS), 3);
        assert_eq!(per_poll(45.0, 35.0), 1);
        assert_eq!(per_poll(70.0, 35.0), 1, "a slow PAUSE still pauses once");
        assert_eq!(per_poll(0.3, 35.0), MOST_PER_POLL);
        assert_eq!(per_poll(0.0, 35.0), 1, "an unreadable clock");
        assert_eq!(per_poll(f64::NAN, 35.0), 1);
        assert_eq!(per_poll(11.5, 0.0), 1, "no gap: a look after each PAUSE");
        assert_eq!(per_poll(11.5, -5.0), 1);
        assert_eq!(line_path(0.0), 1);
    }

    #[test]
    fn a_pause_is_timed_once_and_is_positive() {
        let ns = pause_ns();
        // 0 on a clock too coarse for a run (`per_poll` then asks for one).
        assert!((0.0..10_000.0).contains(&ns), "{ns}");
        assert_eq!(pause_ns(), ns);
        assert!((1..=MOST_PER_POLL).contains(&line_path(LINE_POLL_GAP_NS)));
        assert!(line_path(10_000.0) == MOST_PER_POLL || ns > 10_000.0 / f64::from(MOST_PER_POLL));
    }
}
