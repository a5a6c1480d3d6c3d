//! MPI_Barrier latency under MPI_THREAD_MULTIPLE: `threads` threads per
//! rank (default 4), each on its own communicator (a dup of
//! MPI_COMM_WORLD, made in order by the main thread, so that every rank's
//! thread k meets thread k), each doing a warm-up and then a timed loop of
//! MPI_Barrier, the OSU way. Prints one line on rank 0:
//! `threads=<n> per_barrier_us=<median> min_us=<m> max_us=<x> wall_us=<w> iters=<i>`,
//! the median, min and max over every thread of every rank of its mean µs
//! per barrier, and `wall_us`: the time from the common start to the last
//! thread done, over `iters` (what all threads' barriers together cost; a
//! low per-thread mean with a high wall time means the threads ran one
//! after the other). THREADS_BENCH_VERBOSE=1: each thread's loop times,
//! CPU time and context switches. THREADS_BENCH_PIN=same: both threads of
//! a pair (thread k of every rank) bound to core k mod cores; =apart: thread
//! k of rank r to core k+r mod cores (where the scheduler may put them).
//! Usage: threads_bench [threads] [iters] [warmup]

use mpi::ffi::*;
use mpi::raw::AsRaw;
use mpi::traits::*;

/// A communicator handle moved into its thread (MPI_THREAD_MULTIPLE).
struct Handle(MPI_Comm);
// SAFETY: MPI handles may be used from any thread under
// MPI_THREAD_MULTIPLE; each is used by one thread only.
unsafe impl Send for Handle {}

/// This thread's CPU seconds and voluntary and involuntary context switches.
fn thread_usage() -> (f64, i64, i64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        u
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (s(u.ru_utime) + s(u.ru_stime), u.ru_nvcsw, u.ru_nivcsw)
}

/// Binds the calling thread to core `k` modulo the cores online.
fn pin_to(k: usize) {
    // SAFETY: sysconf has no preconditions; the set is a zeroed local that
    // CPU_SET fills within its size; sched_setaffinity reads it.
    unsafe {
        let cores = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(k % cores, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
    }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(4) as usize;
    let iters = args.get(1).copied().unwrap_or(20_000);
    let warmup = args.get(2).copied().unwrap_or(iters / 10);
    let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Multiple).expect("MPI_Init_thread");
    assert_eq!(level, mpi::Threading::Multiple, "MPI_THREAD_MULTIPLE");
    let world = universe.world();
    let comms: Vec<Handle> = (0..n)
        .map(|_| {
            let mut c = world.as_raw();
            // SAFETY: a live communicator; `c` is an out-parameter.
            assert_eq!(unsafe { MPI_Comm_dup(world.as_raw(), &mut c) }, 0);
            Handle(c)
        })
        .collect();
    let verbose = std::env::var_os("THREADS_BENCH_VERBOSE").is_some();
    let pin = std::env::var("THREADS_BENCH_PIN").ok();
    world.barrier();
    // SAFETY: MPI_Wtime has no preconditions.
    let origin = unsafe { MPI_Wtime() };
    let joins: Vec<_> = comms
        .into_iter()
        .enumerate()
        .map(|(k, comm)| {
            let me = world.rank();
            let pin = pin.clone();
            std::thread::spawn(move || {
                let mut comm = comm;
                match pin.as_deref() {
                    // Both threads of a pair (thread k of each rank) on core k mod cores.
                    Some("same") => pin_to(k),
                    // Thread k of rank r on core k + r mod cores: a pair's threads apart.
                    Some("apart") => pin_to(k + me as usize),
                    _ => {}
                }
                // SAFETY: raw MPI calls on this thread's own communicator.
                unsafe {
                    for _ in 0..warmup {
                        assert_eq!(MPI_Barrier(comm.0), 0);
                    }
                    let u0 = thread_usage();
                    let t0 = MPI_Wtime();
                    for _ in 0..iters {
                        assert_eq!(MPI_Barrier(comm.0), 0);
                    }
                    let t1 = MPI_Wtime();
                    let u1 = thread_usage();
                    let mean = (t1 - t0) * 1e6 / iters as f64;
                    if verbose {
                        let ms = |t: f64| (t - origin) * 1e3;
                        println!(
                            "rank {me} thread {k}: loop {:.1}..{:.1} ms, {mean:.3} us/barrier, cpu {:.1} ms, \
                             switches {} voluntary {} involuntary",
                            ms(t0),
                            ms(t1),
                            (u1.0 - u0.0) * 1e3,
                            u1.1 - u0.1,
                            u1.2 - u0.2
                        );
                    }
                    assert_eq!(MPI_Comm_free(&mut comm.0), 0);
                    (mean, t1)
                }
            })
        })
        .collect();
    let ends: Vec<(f64, f64)> = joins.into_iter().map(|j| j.join().expect("a thread failed")).collect();
    if verbose {
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .unwrap_or_default();
        println!("rank {} threads at the end: {names:?}", world.rank());
    }
    let mine: Vec<f64> = ends.iter().map(|e| e.0).collect();
    // Wall time from the common start to this rank's last thread done, per
    // barrier: what all threads' barriers together cost.
    let wall = (ends.iter().map(|e| e.1).fold(origin, f64::max) - origin) * 1e6 / iters as f64;
    let mut wall_max = 0.0f64;
    world.all_reduce_into(&wall, &mut wall_max, mpi::collective::SystemOperation::max());
    let size = world.size() as usize;
    let mut all = vec![0.0f64; n * size];
    world.all_gather_into(&mine[..], &mut all[..]);
    if world.rank() == 0 {
        all.sort_by(|a, b| a.total_cmp(b));
        let median =
            if all.len() % 2 == 1 { all[all.len() / 2] } else { (all[all.len() / 2 - 1] + all[all.len() / 2]) / 2.0 };
        println!(
            "threads={n} per_barrier_us={median:.3} min_us={:.3} max_us={:.3} wall_us={wall_max:.3} iters={iters}",
            all[0],
            all[all.len() - 1]
        );
    }
}
