//! The line barrier's period against the gap between a release and the
//! next arrival: two plain processes (no MPI), bound to cpus 0 and 1, run
//! hwbarr's line core (`core::line`) on the candidate line its trial picks
//! (`shm::line_pick`), and between leaving one barrier and entering the
//! next each does `gap` ns of work (a chain of dependent multiply-adds,
//! timed here first). In MPI that gap is the way out of MPI_Barrier, the
//! program's own loop and the way back in: the path MPI_Barrier's line
//! path keeps short (`barrier::device::line_barrier`; docs/benchmarks.md,
//! "MPI_Barrier's line path").
//!
//! Each rank also counts the releases it saw together with its peer's next
//! arrival (the peer's wire already one count ahead): the line brought two
//! barriers' news in one transfer. The peer saw that barrier complete at
//! its own arrival, so at most every other release of a rank comes so, and
//! `paired` (those releases, both ranks', over all barriers) runs from 0
//! (every barrier costs its own transfers) to 1 (every transfer carries
//! two barriers). The look is a load of the line the rank just read and a
//! compare: a little gap of its own, at every gap alike.
//!
//! A waiter polls after each PAUSE, as a plain spin loop does; with
//! `LINE_GAP_POLLS=line` it polls as MPI_Barrier's line path does, its
//! polls `pause::LINE_POLL_GAP_NS` apart (docs/benchmarks.md, "Two
//! barriers per transfer").
//!
//! Usage: line_gap [iters] [gap_ns...] (default 300000 barriers per gap;
//! gaps 0 5 10 15 20 30 40 60 100). Each gap is measured in `PASSES`
//! passes over all gaps; prints per gap `gap_ns=<asked> work_ns=<as done>
//! period_ns=<median of passes> min_ns=<fastest pass> paired=<of the
//! median pass>`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mca_coll_hwbarr::core::line;
use mca_coll_hwbarr::shm::segment::Segment;

#[path = "support/forked.rs"]
mod forked;
#[path = "support/picked_line.rs"]
mod picked_line;
use forked::{in_children_on, shared};
use picked_line::on_picked_line;

/// Passes over all gaps; each gap's period is the median of its passes.
const PASSES: usize = 3;

/// `steps` dependent multiply-adds: work that keeps the core busy and
/// touches no memory.
#[inline(never)]
fn work(steps: u64, x: &mut u64) {
    for i in 0..steps {
        *x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
}

/// ns per step of `work`, on this cpu now.
fn ns_per_step() -> f64 {
    let (mut x, steps, reps) = (1u64, 1000u64, 2000u32);
    work(steps, &mut x);
    let t0 = Instant::now();
    for _ in 0..reps {
        work(steps, &mut x);
    }
    t0.elapsed().as_secs_f64() * 1e9 / (f64::from(reps) * steps as f64)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().map(|s| s.parse().expect("iters: a count")).unwrap_or(300_000);
    let mut gaps: Vec<f64> = args.map(|s| s.parse().expect("gap: ns")).collect();
    if gaps.is_empty() {
        gaps = vec![0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 100.0];
    }
    let unit = ns_per_step();
    let pauses = match std::env::var("LINE_GAP_POLLS").as_deref() {
        Ok("line") => mca_coll_hwbarr::pause::line_path(mca_coll_hwbarr::pause::LINE_POLL_GAP_NS),
        Ok(other) => panic!("LINE_GAP_POLLS={other}: only `line` (or unset: a poll after each PAUSE)"),
        Err(_) => 1,
    };
    println!("pauses_per_poll={pauses} pause_ns={:.1}", mca_coll_hwbarr::pause::pause_ns());
    let steps: Vec<u64> = gaps.iter().map(|g| (g / unit).round() as u64).collect();
    let seg = Segment::create(2, 1).expect("a shared-memory segment");
    // Rank 0's ps per barrier, per pass and gap.
    let out = shared::<AtomicU64>(PASSES * gaps.len());
    // Releases seen with the peer one ahead, per rank, pass and gap.
    let paired = shared::<AtomicU64>(2 * PASSES * gaps.len());
    let offer = seg.offer().expect("the creator's offer");
    in_children_on(2, Some(2), |r| {
        // The trial over barriers polled as the timed ones.
        let own = on_picked_line(&offer, 2, r, pauses);
        let (wires, mine) = (own.line_wires(), own.line_mine());
        let mut x = 1u64;
        for pass in 0..PASSES {
            for (i, &n) in steps.iter().enumerate() {
                let mut ahead = 0u64;
                let t0 = Instant::now();
                for _ in 0..iters {
                    let c = line::arrive(wires, r, mine);
                    while !line::is_released(wires, c) {
                        for _ in 0..pauses {
                            std::hint::spin_loop();
                        }
                    }
                    let peer = wires[1 - r].load(Ordering::Relaxed) & line::COUNT;
                    ahead += u64::from(peer == (c.0 + 1) & line::COUNT);
                    work(n, &mut x);
                }
                paired[(pass * gaps.len() + i) * 2 + r].store(ahead, Ordering::Relaxed);
                if r == 0 {
                    let ps = t0.elapsed().as_secs_f64() * 1e12 / iters as f64;
                    out[pass * gaps.len() + i].store(ps as u64, Ordering::Relaxed);
                }
            }
        }
        std::hint::black_box(x);
    });
    for (i, g) in gaps.iter().enumerate() {
        // (ns per barrier, paired share) per pass, by period.
        let mut p: Vec<(f64, f64)> = (0..PASSES)
            .map(|pass| {
                let k = pass * gaps.len() + i;
                let both = paired[2 * k].load(Ordering::Relaxed) + paired[2 * k + 1].load(Ordering::Relaxed);
                (out[k].load(Ordering::Relaxed) as f64 / 1e3, both as f64 / iters as f64)
            })
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (median, paired) = p[PASSES / 2];
        println!(
            "gap_ns={g} work_ns={:.1} period_ns={median:.1} min_ns={:.1} paired={paired:.2}",
            steps[i] as f64 * unit,
            p[0].0
        );
    }
}
