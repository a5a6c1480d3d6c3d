//! MPI_Ibarrier overlap, the osu_ibarrier way, and the persistent barrier's
//! latency against the blocking one. Rank 0 prints one line:
//! `ranks=<n> pure_us=<p> compute_us=<c> overall_us=<o> overlap_pct=<x>
//!  init_us=<i> wait_us=<w> blocking_us=<b> persistent_us=<q> timer_us=<t>
//!  ceiling_pct=<c>`: `timer` is one MPI_Wtime, and `ceiling` the overlap
//!  a free Ibarrier and Wait would score, given the three timer reads the
//!  method itself puts between overall and compute and, when ranks
//!  outnumber cores, the compute phases the last rank waits behind., each the average over ranks.
//! Pure: Ibarrier + Wait. Overall: Ibarrier, then a busy compute phase as
//! long as the pure time (no MPI calls in it), then Wait, each timed as
//! osu_ibarrier times them, with an untimed MPI_Barrier after each
//! iteration. Overlap: 100 × (1 − (overall − compute) / pure).
//! Usage: ibarrier_bench [iters]

use mpi::collective::SystemOperation;
use mpi::raw::AsRaw;
use mpi::traits::*;

#[path = "support/barrier_init.rs"]
mod barrier_init;

/// Spins for `us` microseconds without touching MPI.
fn compute(us: f64) {
    let t0 = std::time::Instant::now();
    while t0.elapsed().as_secs_f64() * 1e6 < us {
        std::hint::spin_loop();
    }
}

fn main() {
    let iters: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let universe = mpi::initialize().expect("MPI_Init");
    let world = universe.world();
    let c = world.as_raw();
    let warm = iters / 10;
    // SAFETY (all blocks below): raw MPI calls on MPI_COMM_WORLD with
    // requests we own and statuses ignored.
    let ibarrier_wait = || unsafe {
        let mut r = mpi::ffi::RSMPI_REQUEST_NULL;
        mpi::ffi::MPI_Ibarrier(c, &mut r);
        mpi::ffi::MPI_Wait(&mut r, mpi::ffi::RSMPI_STATUS_IGNORE);
    };
    let timed = |n: u64, f: &dyn Fn()| {
        world.barrier();
        let t0 = mpi::time();
        for _ in 0..n {
            f();
        }
        (mpi::time() - t0) * 1e6 / n as f64
    };
    (0..warm).for_each(|_| ibarrier_wait());
    // As osu_ibarrier: each iteration timed on its own.
    world.barrier();
    let mut pure_sum = 0.0;
    for _ in 0..iters {
        let t = mpi::time();
        ibarrier_wait();
        pure_sum += mpi::time() - t;
    }
    let pure = pure_sum * 1e6 / iters as f64;
    // As osu_ibarrier: init, compute and wait are timed inside the loop,
    // and a blocking barrier (not timed) lines the ranks up after each one.
    let (mut overall_sum, mut tinit, mut tcomp, mut twait) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..warm + iters {
        // SAFETY: as above.
        let (t_start, t_init, t_comp, t_wait, t_stop) = unsafe {
            let mut r = mpi::ffi::RSMPI_REQUEST_NULL;
            let t_start = mpi::time();
            mpi::ffi::MPI_Ibarrier(c, &mut r);
            let t_init = mpi::time();
            compute(pure);
            let t_comp = mpi::time();
            mpi::ffi::MPI_Wait(&mut r, mpi::ffi::RSMPI_STATUS_IGNORE);
            let t_wait = mpi::time();
            (t_start, t_init, t_comp, t_wait, mpi::time())
        };
        if i >= warm {
            overall_sum += t_stop - t_start;
            tinit += t_init - t_start;
            tcomp += t_comp - t_init;
            twait += t_wait - t_comp;
        }
        world.barrier();
    }
    let overall = overall_sum * 1e6 / iters as f64;
    let compute_only = tcomp * 1e6 / iters as f64;
    let wait_after = twait * 1e6 / iters as f64;
    let init = tinit * 1e6 / iters as f64;
    (0..warm).for_each(|_| world.barrier());
    let blocking = timed(iters, &|| world.barrier());
    let mut p = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
    unsafe { barrier_init::barrier_init(c, mpi::ffi::RSMPI_INFO_NULL, &mut p) };
    let pp = &mut p as *mut mpi::ffi::MPI_Request;
    let start_wait = || unsafe {
        mpi::ffi::MPI_Start(pp);
        mpi::ffi::MPI_Wait(pp, mpi::ffi::RSMPI_STATUS_IGNORE);
    };
    (0..warm).for_each(|_| start_wait());
    let persistent = timed(iters, &start_wait);
    unsafe { mpi::ffi::MPI_Request_free(&mut p) };

    // What one timer read costs: overall − compute holds three of them
    // (after Ibarrier, after Wait, at the stop), whatever the barrier does.
    let reads = 100_000;
    let t = mpi::time();
    let mut sink = 0.0;
    for _ in 0..reads {
        sink += mpi::time();
    }
    let timer = (mpi::time() - t) * 1e6 / reads as f64;
    std::hint::black_box(sink);

    let n = world.size() as f64;
    let avg = |x: f64| {
        let mut s = 0.0;
        world.all_reduce_into(&x, &mut s, SystemOperation::sum());
        s / n
    };
    let (pure, compute_only, overall, blocking, persistent, wait_after, init) =
        (avg(pure), avg(compute_only), avg(overall), avg(blocking), avg(persistent), avg(wait_after), avg(init));
    let timer = avg(timer);
    let overlap = (100.0 * (1.0 - (overall - compute_only) / pure)).clamp(0.0, 100.0);
    // The overlap an Ibarrier and a Wait costing nothing would score: the
    // method's own timer reads count as communication, and when ranks
    // outnumber cores every rank's compute phase needs a share of them, so
    // the last rank enters (ranks/cores − 1) compute phases late.
    // SAFETY: sysconf has no memory-safety preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as f64;
    let late = (n / cores - 1.0).max(0.0) * compute_only;
    let ceiling = (100.0 * (1.0 - (3.0 * timer + late) / pure)).clamp(0.0, 100.0);
    if world.rank() == 0 {
        println!(
            "ranks={} pure_us={pure:.3} compute_us={compute_only:.3} overall_us={overall:.3} overlap_pct={overlap:.1} init_us={init:.3} wait_us={wait_after:.3} \
             blocking_us={blocking:.3} persistent_us={persistent:.3} timer_us={timer:.3} ceiling_pct={ceiling:.1}",
            world.size()
        );
    }
}
