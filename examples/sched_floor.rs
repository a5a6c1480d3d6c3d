//! The scheduler's floor for a barrier when ranks outnumber cores: n plain
//! processes (no MPI) run hwbarr's counter core and then its line core on
//! shared memory, wait the cheapest way this kernel offers (one poll then
//! sched_yield), and the faster of the two is the floor. Whatever
//! a barrier component does inside MPI, it cannot beat this by much: each
//! core must switch between its ranks at least once per barrier. With no
//! more ranks than cores the waiters spin instead (the floor is then the
//! cache-line transfer, and the line core runs on the fastest of the
//! candidate lines hwbarr's line barrier tries, picked the same way:
//! `shm::line_pick`).
//! Also measures one yield hand-off (two processes on one core passing a
//! token by sched_yield), the unit cost behind it.
//!
//! Prints, like barrier_bench: `ranks=<n> avg_us=<a> min_us=<m> max_us=<x>
//! iters=<i> handoff_us=<h> core=<the faster> counter_us=<c> line_us=<l>
//! placement=<rank:start cpu>end cpu,...>` (avg, min, max and placement over
//! ranks, of the faster core).
//! Usage: sched_floor <ranks> [iters] [bind] (bind: process i on cpu i mod
//! cpus, as `mpirun --map-by core --bind-to core` lays ranks out).

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

use mca_coll_hwbarr::core::{counter, line};
use mca_coll_hwbarr::shm::segment::Segment;
use mca_coll_hwbarr::sync::Line;

#[path = "support/forked.rs"]
mod forked;
#[path = "support/picked_line.rs"]
mod picked_line;
use forked::{in_children, in_children_on, pin_to, shared};
use picked_line::on_picked_line;

/// Whether this process may run on each of cpus 0..`cores` (a `taskset`
/// or cgroup may forbid some; pinning a child there would fail and leave
/// it unbound).
fn may_use_cpus(cores: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid out-buffer for our own mask.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && (0..cores).all(|c| libc::CPU_ISSET(c, &set))
    }
}

fn yield_now() {
    // SAFETY: no preconditions.
    unsafe { libc::sched_yield() };
}

/// Mean time of one sched_yield hand-off between two processes on CPU 0.
fn handoff_us(turns: u64) -> f64 {
    let token = &shared::<Line<AtomicU64>>(1)[0];
    let out = &shared::<AtomicU64>(1)[0];
    in_children(2, |me| {
        pin_to(0);
        let t0 = Instant::now();
        for _ in 0..turns {
            while token.load(Ordering::Acquire) % 2 != me as u64 {
                yield_now();
            }
            token.fetch_add(1, Ordering::AcqRel);
        }
        if me == 0 {
            out.store((t0.elapsed().as_secs_f64() * 1e9 / (2 * turns) as f64) as u64, Ordering::Release);
        }
    });
    out.load(Ordering::Acquire) as f64 / 1e3
}

/// The cores the floor tries: the fastest is the floor.
#[derive(Clone, Copy, Debug)]
enum Core {
    Counter,
    Line,
}

/// The cpu this process runs on now (-1 if unknown).
fn cpu() -> i64 {
    // SAFETY: no preconditions.
    i64::from(unsafe { libc::sched_getcpu() })
}

/// Each rank's mean µs per barrier over `iters` barriers of `core`, and
/// where the ranks ran: `rank:start cpu>end cpu` of the timed loop, as
/// barrier_osu prints it (which `make bench` groups launches by).
fn measure(core: Core, n: usize, iters: usize, cores: usize, bind: bool) -> (Vec<f64>, String) {
    let warm = iters / 10;
    let cells = shared::<Line<AtomicI32>>(n);
    // The line core's wires: a segment as hwbarr's, which the forked
    // children share (a memfd mapping).
    let seg = Segment::create(n, 1).expect("a shared-memory segment");
    let offer = seg.offer().expect("the creator's offer");
    // A child's own line count on the first line (`line::arrive`), copied
    // into each by the fork.
    let first_mine = AtomicU8::new(0);
    let means = shared::<AtomicU64>(n);
    let cpus = shared::<AtomicI32>(2 * n);
    in_children_on(n, bind.then_some(cores), |r| {
        // With a core each, the fastest candidate line (rank 0 times them
        // all; every child ends on its pick, at its count there).
        let own = match core {
            Core::Line if n <= cores => Some(on_picked_line(&offer, n, r, 1)),
            _ => None,
        };
        let (wires, mine) = match &own {
            Some(own) => (own.line_wires(), own.line_mine()),
            None => (seg.line_candidate(0), &first_mine),
        };
        let released = |c: line::Count| match core {
            Core::Counter => counter::is_released(cells, r),
            Core::Line => line::is_released(wires, c),
        };
        let mut t0 = Instant::now();
        for i in 0..warm + iters {
            if i == warm {
                cpus[2 * r].store(cpu() as i32, Ordering::Relaxed);
                t0 = Instant::now();
            }
            let c = match core {
                Core::Counter => {
                    counter::arrive(cells, r);
                    line::Count(0)
                }
                Core::Line => line::arrive(wires, r, mine),
            };
            while !released(c) {
                if n > cores {
                    yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // Picoseconds: a barrier between two cores takes tens of ns.
        let ps = t0.elapsed().as_secs_f64() * 1e12 / iters as f64;
        cpus[2 * r + 1].store(cpu() as i32, Ordering::Relaxed);
        means[r].store(ps as u64, Ordering::Release);
    });
    // waitpid orders the children's stores before these loads.
    let placement: Vec<String> = (0..n)
        .map(|r| format!("{r}:{}>{}", cpus[2 * r].load(Ordering::Relaxed), cpus[2 * r + 1].load(Ordering::Relaxed)))
        .collect();
    (means.iter().map(|m| m.load(Ordering::Acquire) as f64 / 1e6).collect(), placement.join(","))
}

fn main() {
    let bind = std::env::args().any(|a| a == "bind");
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(4).max(1);
    let iters = args.get(1).copied().unwrap_or(20_000);
    // SAFETY: sysconf has no memory-safety preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if bind && !may_use_cpus(cores) {
        eprintln!("sched_floor: bind needs cpus 0..{cores}, and this process may not use all of them");
        std::process::exit(2);
    }
    let avg = |us: &[f64]| us.iter().sum::<f64>() / us.len() as f64;
    let runs: Vec<(Core, (Vec<f64>, String))> =
        [Core::Counter, Core::Line].map(|c| (c, measure(c, n, iters, cores, bind))).into();
    let (best, (us, placement)) = runs.iter().min_by(|a, b| avg(&a.1 .0).total_cmp(&avg(&b.1 .0))).expect("two cores");
    let min = us.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = us.iter().cloned().fold(0.0, f64::max);
    let each: Vec<String> =
        runs.iter().map(|(c, (us, _))| format!("{}_us={:.4}", format!("{c:?}").to_lowercase(), avg(us))).collect();
    println!(
        "ranks={n} avg_us={:.4} min_us={min:.4} max_us={max:.4} iters={iters} handoff_us={:.3} core={} {} placement={placement}",
        avg(us),
        handoff_us(20_000),
        format!("{best:?}").to_lowercase(),
        each.join(" ")
    );
}
