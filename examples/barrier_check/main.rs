//! The MPI program of hwbarr's integration tests (tests/*.rs), run under mpirun with the component
//! just built: `barrier_check <mode> <n>` (default `semantics 1000`). Barriers are checked on a
//! board: a file every rank maps ($HWBARR_BOARD), one count per communicator and world rank, so that
//! a rank that leaves barrier k checks that every member entered it. One module per mode, named as
//! the mode, which says more:
//!
//! - `semantics <iters>`: barriers with random delays on world, a dup, a split, subsets, node ranks, short-lived dups.
//! - `progress <rounds>`: a barrier between a large MPI_Isend and its MPI_Recv ends only if it turns MPI progress.
//! - `churn <live>`: `live` dups alive at once, then freed, twice: the hwbarr segments mapped at each point.
//! - `die <after>`: a rank dies (SIGKILL or MPI_Abort) while the others wait in a barrier of some kind.
//! - `p2pfault <iters>`: barriers while hwbarr's own point-to-point operations fail: the error each rank gets.
//! - `soak <barriers>`: every kind of barrier on long- and short-lived communicators; memory, mappings, fds.
//! - `lifecycle <rounds>`: communicators freed with a barrier pending, refused request frees, finalize in flight.
//! - `threads <rounds>`: MPI_THREAD_MULTIPLE, threads creating, using and freeing communicators of their own.
//! - `setups <rounds>`: MPI_THREAD_MULTIPLE, threads running the first barriers of their communicators at once.
//! - `absent <rounds>`: a non-blocking barrier completes for one rank while the others make no MPI call.
//! - `overlap <rounds>`: two MPI_Ibarrier and an MPI_Ibcast outstanding at once on rank 0: the broadcast is right.
//! - `intercomm <rounds>`: barrier, broadcast, scatter and allreduce on an even/odd intercommunicator.
//! - `nonblocking <iters>`: MPI_Ibarrier on three communicators completed in random orders, mixed with blocking.
//! - `persistent <iters>`: persistent barriers started and completed (Wait, Test loops), inactive and freed.
//! - `leak <ops>`: hwbarr mappings, fds and resident memory before and after many ibarriers and persistent starts.
//! - `pvar <iters>`: the MPI_T performance variable `coll_hwbarr_barriers` bound to a dup and to MPI_COMM_SELF.
//! - `spawn <iters>`: the job spawns as many ranks again; checked barriers of every kind on parents and children merged.
//! - `accept <iters>`, `connect <iters>`: two mpiruns join by MPI_Comm_accept/connect; checked barriers of every kind merged.
//! - `sessions <iters>`: MPI Sessions without MPI_Init: checked barriers on communicators made from groups.
//! - `first <iters>`: the first barrier on a fresh dup of the kind $HWBARR_FIRST names, then every kind in turn.
//! - `idle <ms>`: rank 0 computes `ms` ms before a barrier; the others say how much CPU their wait used.
//! - `crowd <iters>`: the ranks start their barriers on one CPU while others are free: where each ends up.

mod absent;
mod churn;
mod connect;
mod crowd;
mod die;
mod first;
mod idle;
mod intercomm;
mod leak;
mod lifecycle;
mod nonblocking;
mod overlap;
mod p2pfault;
mod persistent;
mod progress;
mod pvar;
mod semantics;
mod sessions;
mod setups;
mod soak;
mod spawn;
mod threads;

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use mpi::collective::SystemOperation;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;

const SLOTS: usize = 16;
const MAX_RANKS: usize = 64;

/// Per (communicator slot, world rank): barriers entered, in a file every
/// rank of the job maps.
struct Board {
    cells: &'static [AtomicU64],
}

impl Board {
    fn open() -> Board {
        let path = std::env::var("HWBARR_BOARD").expect("HWBARR_BOARD names the board file");
        let f = OpenOptions::new().read(true).write(true).open(&path).expect("open board");
        let len = SLOTS * MAX_RANKS * 8;
        f.set_len(len as u64).unwrap();
        // SAFETY: a shared mapping of a file sized above; it stays mapped
        // until the process exits, so the 'static slice never dangles, and
        // all access goes through atomics.
        let cells = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap board");
            std::slice::from_raw_parts(p as *const AtomicU64, SLOTS * MAX_RANKS)
        };
        Board { cells }
    }
    fn cell(&self, slot: usize, world_rank: usize) -> &AtomicU64 {
        &self.cells[slot * MAX_RANKS + world_rank]
    }
}

/// A communicator under test: its board slot, members' world ranks, and
/// how many barriers we called on it.
struct Tested {
    comm: SimpleCommunicator,
    slot: usize,
    members: Vec<usize>,
    count: u64,
}

impl Tested {
    fn new(comm: SimpleCommunicator, slot: usize, me: usize) -> Tested {
        let mut members = vec![0i32; comm.size() as usize];
        comm.all_gather_into(&(me as i32), &mut members[..]);
        Tested { comm, slot, members: members.into_iter().map(|m| m as usize).collect(), count: 0 }
    }

    fn checked_barrier(&mut self, board: &Board, me: usize) {
        let k = self.enter(board, me);
        if std::env::var_os("HWBARR_SKIP_BARRIER").is_none() {
            self.comm.barrier();
        }
        for &q in &self.members {
            let e = board.cell(self.slot, q).load(SeqCst);
            if e < k {
                eprintln!(
                    "VIOLATION: world rank {me} left barrier {k} of slot {} before rank {q} entered it (entered {e})",
                    self.slot
                );
                std::process::exit(1);
            }
        }
    }

    /// Counts the next barrier as entered on the board; returns its number.
    fn enter(&mut self, board: &Board, me: usize) -> u64 {
        self.count += 1;
        board.cell(self.slot, me).store(self.count, SeqCst);
        self.count
    }

    fn other_collectives(&self, iter: u64) {
        let sum_expected: i64 = self.members.iter().map(|&m| m as i64).sum();
        let mine = self.members[self.comm.rank() as usize] as i64;
        let mut sum = 0i64;
        self.comm.all_reduce_into(&mine, &mut sum, SystemOperation::sum());
        assert_eq!(sum, sum_expected, "allreduce result");
        let mut v = if self.comm.rank() == 0 { iter } else { 0 };
        self.comm.process_at_rank(0).broadcast_into(&mut v);
        assert_eq!(v, iter, "bcast result");
    }
}

/// xorshift: deterministic per rank, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Spin, yield or sleep a little: ranks arrive in every order.
    fn delay(&mut self) {
        let x = self.next();
        match x % 64 {
            0 => std::thread::sleep(std::time::Duration::from_micros(x % 200)),
            1..=3 => std::thread::yield_now(),
            _ => (0..(x % 2000)).for_each(|_| std::hint::spin_loop()),
        }
    }
}

/// hwbarr segments this process maps, and its open fds.
fn segments_and_fds() -> (usize, usize) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let segs = maps.lines().filter(|l| l.contains("memfd:hwbarr")).count();
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    (segs, fds)
}

#[path = "../support/barrier_init.rs"]
mod barrier_init;

/// A raw request we wait for ourselves (rsmpi has no persistent requests).
struct Raw(mpi::ffi::MPI_Request);

impl Raw {
    fn ibarrier(comm: &SimpleCommunicator) -> Raw {
        use mpi::raw::AsRaw;
        // SAFETY: MPI_REQUEST_NULL is a valid initial value; the call fills it.
        let mut r = Raw(unsafe { mpi::ffi::RSMPI_REQUEST_NULL });
        // SAFETY: live communicator, valid out-pointer.
        assert_eq!(unsafe { mpi::ffi::MPI_Ibarrier(comm.as_raw(), &mut r.0) }, 0);
        r
    }
    fn persistent(comm: &SimpleCommunicator) -> Raw {
        use mpi::raw::AsRaw;
        // SAFETY: as above.
        let mut r = Raw(unsafe { mpi::ffi::RSMPI_REQUEST_NULL });
        // SAFETY: live communicator, MPI_INFO_NULL, valid out-pointer.
        assert_eq!(unsafe { barrier_init::barrier_init(comm.as_raw(), mpi::ffi::RSMPI_INFO_NULL, &mut r.0) }, 0);
        r
    }
    fn start(&mut self) {
        // SAFETY: an inactive persistent request of ours.
        assert_eq!(unsafe { mpi::ffi::MPI_Start(&mut self.0) }, 0);
    }
    fn wait(&mut self) {
        // SAFETY: a request of ours; MPI_STATUS_IGNORE is valid.
        assert_eq!(unsafe { mpi::ffi::MPI_Wait(&mut self.0, mpi::ffi::RSMPI_STATUS_IGNORE) }, 0);
    }
    fn test(&mut self) -> bool {
        let mut flag = 0;
        // SAFETY: as above.
        assert_eq!(unsafe { mpi::ffi::MPI_Test(&mut self.0, &mut flag, mpi::ffi::RSMPI_STATUS_IGNORE) }, 0);
        flag != 0
    }
    fn free(&mut self) {
        // SAFETY: an inactive persistent request of ours.
        assert_eq!(unsafe { mpi::ffi::MPI_Request_free(&mut self.0) }, 0);
    }
}

fn wait_all(reqs: &mut [Raw]) {
    let mut raw: Vec<_> = reqs.iter().map(|r| r.0).collect();
    // SAFETY: our requests; statuses ignored.
    let rc = unsafe { mpi::ffi::MPI_Waitall(raw.len() as i32, raw.as_mut_ptr(), mpi::ffi::RSMPI_STATUSES_IGNORE) };
    assert_eq!(rc, 0);
    for (r, x) in reqs.iter_mut().zip(raw) {
        r.0 = x;
    }
}

/// After a non-blocking barrier k completed on `t`: did every member enter?
fn check_after(t: &Tested, board: &Board, me: usize, k: u64) {
    for &q in &t.members {
        let e = board.cell(t.slot, q).load(SeqCst);
        if e < k {
            eprintln!("VIOLATION: world rank {me} completed barrier {k} of slot {} before rank {q} entered it", t.slot);
            std::process::exit(1);
        }
    }
}

/// A raw communicator handle lent to a thread (MPI_THREAD_MULTIPLE modes).
struct Handle(mpi::ffi::MPI_Comm);

// SAFETY: MPI handles may be used from any thread under
// MPI_THREAD_MULTIPLE; each is used by one thread at a time.
unsafe impl Send for Handle {}

/// `count` dups of MPI_COMM_WORLD, made on this thread; the caller frees them.
fn world_dups(world: &SimpleCommunicator, count: usize) -> Vec<Handle> {
    use mpi::raw::AsRaw;
    (0..count)
        .map(|_| {
            let mut c = world.as_raw();
            // SAFETY: a live communicator; `c` is an out-parameter.
            assert_eq!(unsafe { mpi::ffi::MPI_Comm_dup(world.as_raw(), &mut c) }, 0);
            Handle(c)
        })
        .collect()
}

fn rss_kib() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("semantics");
    let arg: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    if mode == "sessions" {
        return sessions::run(arg); // no MPI_Init: the session is the program's only MPI
    }
    // `threads` and `setups` need MPI_THREAD_MULTIPLE; HWBARR_THREAD_MULTIPLE asks it
    // for the other modes too (their one thread makes every call).
    let universe = if mode == "threads" || mode == "setups" || std::env::var_os("HWBARR_THREAD_MULTIPLE").is_some() {
        let (u, level) = mpi::initialize_with_threading(mpi::Threading::Multiple).expect("MPI_Init_thread");
        assert_eq!(level, mpi::Threading::Multiple, "MPI_THREAD_MULTIPLE");
        u
    } else {
        mpi::initialize().expect("MPI_Init")
    };
    let world = universe.world();
    match mode {
        "semantics" => semantics::run(&world, arg),
        "progress" => progress::run(&world, arg),
        "churn" => churn::run(&world, arg),
        "die" => die::run(&world, arg),
        "p2pfault" => p2pfault::run(&world, arg),
        "soak" => soak::run(&world, arg),
        "intercomm" => intercomm::run(&world, arg),
        "nonblocking" => nonblocking::run(&world, arg),
        "persistent" => persistent::run(&world, arg),
        "leak" => leak::run(&world, arg),
        "pvar" => pvar::run(&world, arg),
        "first" => first::run(&world, arg),
        "idle" => idle::run(&world, arg),
        "crowd" => crowd::run(&world, arg),
        "overlap" => overlap::run(&world, arg),
        "absent" => absent::run(&world, arg),
        "lifecycle" => lifecycle::run(&world, arg),
        "threads" => threads::run(&world, arg),
        "setups" => setups::run(&world, arg),
        "spawn" => spawn::run(&world, arg),
        "accept" => connect::run(&world, arg, true),
        "connect" => connect::run(&world, arg, false),
        other => panic!("unknown mode {other}"),
    }
}
