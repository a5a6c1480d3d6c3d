//! MPI_Barrier latency, measured the OSU way (osu_barrier): warm-up
//! iterations, a timed loop, each rank's mean, then the average, min and
//! max of those over ranks. Prints one line rank 0:
//! `ranks=<n> avg_us=<a> min_us=<m> max_us=<x> iters=<i>`.
//! Usage: barrier_bench [iters] [warmup]

use mpi::collective::SystemOperation;
use mpi::traits::*;

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let iters = args.first().copied().unwrap_or(10_000);
    let warmup = args.get(1).copied().unwrap_or(iters / 10);
    let universe = mpi::initialize().expect("MPI_Init");
    let world = universe.world();
    for _ in 0..warmup {
        world.barrier();
    }
    let t0 = mpi::time();
    for _ in 0..iters {
        world.barrier();
    }
    let mine = (mpi::time() - t0) * 1e6 / iters as f64;
    let (mut sum, mut min, mut max) = (0.0f64, 0.0f64, 0.0f64);
    world.all_reduce_into(&mine, &mut sum, SystemOperation::sum());
    world.all_reduce_into(&mine, &mut min, SystemOperation::min());
    world.all_reduce_into(&mine, &mut max, SystemOperation::max());
    if world.rank() == 0 {
        let n = world.size();
        println!("ranks={n} avg_us={:.3} min_us={:.3} max_us={:.3} iters={iters}", sum / n as f64, min, max);
    }
}
