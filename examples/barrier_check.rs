//! MPI test program for hwbarr's integration tests (tests/*.rs), run
//! under mpirun with the built component. Modes:
//!
//! - `semantics <iters>`: thousands of barriers with random per-rank delays
//!   on MPI_COMM_WORLD, a dup, an even/odd split (same context id on both
//!   halves), two overlapping subsets, each node's ranks (split_type
//!   SHARED), and short-lived dups, interleaved with
//!   allreduce and bcast. A board in a shared file ($HWBARR_BOARD) records
//!   how many barriers each rank entered on each communicator; after every
//!   barrier a rank checks that every member entered it. Exits 1 on a
//!   violation.
//! - `progress <rounds>`: one rank posts a large MPI_Isend then enters
//!   MPI_Barrier, its peer posts the matching MPI_Recv then enters the
//!   barrier. Only a barrier that turns MPI progress while waiting finishes.
//! - `churn <live>`: `live` communicators alive at once, each used for a
//!   barrier, then all freed, twice; prints how many hwbarr segments this
//!   process maps at each point.
//! - `die <after>`: world rank 1 SIGKILLs itself in the middle of barriers;
//!   with HWBARR_DIE=kill|abort one rank dies (SIGKILL or MPI_Abort) while
//!   the others wait in MPI_Barrier, MPI_Wait on an MPI_Ibarrier or on a
//!   persistent barrier (HWBARR_DIE_WAIT), after writing the time of its
//!   death to HWBARR_DIE_STAMP (see `die_while_others_wait`).
//! - `p2pfault <iters>`: barriers on a dup with MPI_ERRORS_RETURN, run with
//!   hwbarr's own point-to-point operations failing (HWBARR_FAULT_P2P, test
//!   builds); prints the error class each rank got.
//! - `soak <barriers>`: blocking, non-blocking and persistent barriers on
//!   long-lived and short-lived communicators with random delays, checked
//!   on the board; prints resident memory, mappings and fds after warm-up
//!   and at the end (see `soak`).
//! - `lifecycle <rounds>`: communicators freed with a barrier pending,
//!   refused frees of pending requests, MPI_Finalize with one in flight
//!   (`$HWBARR_LIFECYCLE`, `$HWBARR_FIRST`).
//! - `threads <rounds>`: MPI_THREAD_MULTIPLE, threads each creating and
//!   freeing communicators of their own.
//! - `overlap <rounds>`: on fresh dups, rank 0 starts two MPI_Ibarrier and an
//!   MPI_Ibcast before it waits for any; the others wait for the first
//!   ibarrier before they start the rest (legal: the same order of
//!   collectives on every rank). Every rank checks the broadcast value.
//!   Meant for the device refused: rank 0's second ibarrier, queued behind
//!   the first exchange, must not change the order in which the ranks'
//!   non-blocking collectives take their tags (it did when libnbc served it).
//! - `intercomm <rounds>`: barrier, broadcast, scatter and allreduce on an
//!   even/odd intercommunicator.
//! - `nonblocking <iters>`: MPI_Ibarrier on three communicators at once,
//!   completed in a random order per rank (Wait, Test loops, Waitany,
//!   Waitall); ibarrier then blocking barrier on one communicator; two
//!   ibarriers outstanding on one communicator; all checked on the board.
//! - `persistent <iters>`: MPI(X)_Barrier_init + MPI_Start/MPI_Wait (or Test
//!   loops) with random delays, checked on the board; inactive and freed
//!   requests.
//! - `leak <ops>`: that many ibarriers and persistent starts; prints the
//!   process's hwbarr mappings, fds and resident memory before and after.
//! - `first <iters>`: on a fresh dup of MPI_COMM_WORLD, the first barrier is
//!   of the kind $HWBARR_FIRST names — `blocking`, `nonblocking`,
//!   `persistent`, or `order-a` (rank 0: Ibarrier, Barrier, Wait; the others:
//!   Ibarrier, sleep 20 ms, Wait, Barrier) — then `iters` rounds of all of
//!   them (order-a with a rotating first rank, two outstanding ibarriers, a
//!   persistent start), every completion checked on the board. Meant to run
//!   with the device refused (tests/fault_preload.c), where the component
//!   below hwbarr serves.

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
        self.count += 1;
        let k = self.count;
        board.cell(self.slot, me).store(k, SeqCst);
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

fn semantics(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    assert!(n <= MAX_RANKS);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((me as u64 + 1) * 0x1234_5678_9ABC));
    // MPI_COMM_WORLD itself (rsmpi's world handle is never freed), a dup,
    // an even/odd split, and two overlapping subsets.
    let mut tested = vec![Tested::new(SimpleCommunicator::world(), 0, me), Tested::new(world.duplicate(), 1, me)];
    if let Some(c) = world.split_by_color(Color::with_value((me % 2) as i32)) {
        tested.push(Tested::new(c, 2, me));
    }
    let head: Vec<i32> = (0..(n.max(2) - 1) as i32).collect();
    let tail: Vec<i32> = (1..n as i32).collect();
    for (slot, ranks) in [(3, head), (4, tail)] {
        let g = world.group().include(&ranks);
        if let Some(c) = world.split_by_subgroup_collective(&g) {
            tested.push(Tested::new(c, slot, me));
        }
    }
    // The ranks of our node (MPI_Comm_split_type SHARED): inside one node.
    tested.push(Tested::new(world.split_shared(0), 6, me));
    // Short-lived dups: context ids freed and reused; the count lives on.
    let mut short_count = 0;
    for i in 0..iters {
        for t in tested.iter_mut() {
            rng.delay();
            t.checked_barrier(&board, me);
            if i % 64 == 0 {
                t.other_collectives(i);
            }
        }
        if i % 100 == 0 {
            let mut t = Tested::new(world.duplicate(), 5, me);
            t.count = short_count;
            for _ in 0..3 {
                t.checked_barrier(&board, me);
            }
            short_count = t.count;
        }
    }
    println!("rank {me}: semantics OK ({} barriers on MPI_COMM_WORLD)", tested[0].count);
}

fn progress(world: &SimpleCommunicator, rounds: u64) {
    let me = world.rank();
    let buf = vec![7u8; 8 << 20];
    let mut inbox = vec![0u8; 8 << 20];
    for round in 0..rounds {
        let (sender, receiver) = if round % 2 == 0 { (0, 1) } else { (1, 0) };
        if me == sender {
            mpi::request::scope(|scope| {
                let req = world.process_at_rank(receiver).immediate_send(scope, &buf[..]);
                world.barrier();
                req.wait();
            });
        } else if me == receiver {
            world.process_at_rank(sender).receive_into(&mut inbox[..]);
            assert!(inbox.iter().all(|&b| b == 7));
            inbox.fill(0);
            world.barrier();
        } else {
            world.barrier();
        }
    }
    println!("rank {me}: progress OK");
}

/// hwbarr segments this process maps, and its open fds.
fn segments_and_fds() -> (usize, usize) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let segs = maps.lines().filter(|l| l.contains("memfd:hwbarr")).count();
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    (segs, fds)
}

fn churn(world: &SimpleCommunicator, live: u64) {
    world.barrier();
    let (base, base_fds) = segments_and_fds();
    for round in 0..2 {
        let comms: Vec<_> = (0..live).map(|_| world.duplicate()).collect();
        comms.iter().for_each(|c| c.barrier());
        let (alive, _) = segments_and_fds();
        drop(comms);
        world.barrier();
        let (after, fds) = segments_and_fds();
        if world.rank() == 0 {
            println!("churn round {round}: base {base} live {alive} after {after} fds {base_fds}->{fds}");
        }
    }
}

fn die(world: &SimpleCommunicator, after: u64) {
    let how = std::env::var("HWBARR_DIE").unwrap_or_else(|_| "inside".into());
    if how != "inside" {
        return die_while_others_wait(world, after, &how);
    }
    let me = world.rank();
    for i in 0..after {
        world.barrier();
        if i + 1 == after && me == 1 {
            // Killed while waiting inside the next barrier, which rank 0
            // enters late.
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                // SAFETY: kill(2) on our own pid.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            });
        }
    }
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    world.barrier();
    world.barrier();
    println!("rank {me}: survived");
}

/// `die` with HWBARR_DIE=kill|abort: after `after` barriers of every kind,
/// every rank but one (HWBARR_DIE_RANK, default the last) waits in the
/// kind HWBARR_DIE_WAIT names (`barrier`, `ibarrier`: MPI_Wait on an
/// MPI_Ibarrier, `persistent`: MPI_Wait on a started persistent barrier);
/// the dying rank lets them settle (300 ms: long enough to be asleep on
/// the futex when waiting sleeps), writes the time of its death (ns since
/// the epoch) and the /dev/shm files it maps to HWBARR_DIE_STAMP, and
/// SIGKILLs itself or calls MPI_Abort.
fn die_while_others_wait(world: &SimpleCommunicator, after: u64, how: &str) {
    let me = world.rank();
    let victim = std::env::var("HWBARR_DIE_RANK").ok().and_then(|s| s.parse().ok()).unwrap_or(world.size() - 1);
    let wait = std::env::var("HWBARR_DIE_WAIT").unwrap_or_else(|_| "barrier".into());
    let mut p = Raw::persistent(world);
    for _ in 0..after {
        world.barrier();
        Raw::ibarrier(world).wait();
        p.start();
        p.wait();
    }
    if me != victim {
        match wait.as_str() {
            "barrier" => world.barrier(),
            "ibarrier" => Raw::ibarrier(world).wait(),
            "persistent" => {
                p.start();
                p.wait();
            }
            other => panic!("unknown HWBARR_DIE_WAIT {other}"),
        }
        println!("rank {me}: survived");
        return;
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut shm: Vec<&str> =
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|f| f.starts_with("/dev/shm/")).collect();
    shm.sort();
    shm.dedup();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    if let Ok(path) = std::env::var("HWBARR_DIE_STAMP") {
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, format!("{now}\n{}\n", shm.join("\n"))).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    if how == "abort" {
        use mpi::raw::AsRaw;
        // SAFETY: MPI_Abort on a live communicator; it does not return.
        unsafe { mpi::ffi::MPI_Abort(world.as_raw(), 7) };
    }
    // SAFETY: kill(2) on our own pid.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
}

/// `p2pfault <iters>`: on a dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
/// `iters` barriers of the kind HWBARR_KIND names (`blocking`,
/// `nonblocking`, `persistent`), meant to run with HWBARR_FAULT_P2P (a
/// component built with the `fault-injection` feature). A rank that gets
/// an error prints its class and stops using the dup; then, with
/// HWBARR_ON_ERROR=abort, it calls MPI_Abort; otherwise every rank meets
/// in a barrier on MPI_COMM_WORLD, frees the dup and finalizes.
fn p2pfault(world: &SimpleCommunicator, iters: u64) {
    use mpi::raw::AsRaw;
    let me = world.rank();
    let kind = std::env::var("HWBARR_KIND").unwrap_or_else(|_| "blocking".into());
    let dup = world.duplicate();
    let comm = dup.as_raw();
    // SAFETY: raw MPI calls on a live communicator; requests are ours and
    // waited on or freed below.
    unsafe {
        assert_eq!(mpi::ffi::MPI_Comm_set_errhandler(comm, mpi::ffi::RSMPI_ERRORS_RETURN), 0);
        if std::env::var_os("HWBARR_WORLD_ERRORS_RETURN").is_some() {
            // Open MPI 4.1's MPI_Wait raises a failed collective request's
            // error on MPI_COMM_WORLD's handler, not its communicator's.
            assert_eq!(mpi::ffi::MPI_Comm_set_errhandler(world.as_raw(), mpi::ffi::RSMPI_ERRORS_RETURN), 0);
        }
        let mut p = mpi::ffi::RSMPI_REQUEST_NULL;
        if kind == "persistent" || kind == "mixed" {
            assert_eq!(barrier_init::barrier_init(comm, mpi::ffi::RSMPI_INFO_NULL, &mut p), 0);
        }
        let mut failed = None;
        for k in 1..=iters {
            // "mixed": blocking, non-blocking and persistent in turn.
            let this = match (kind.as_str(), k % 3) {
                ("mixed", 0) => "blocking",
                ("mixed", 1) => "nonblocking",
                ("mixed", _) => "persistent",
                (other, _) => other,
            };
            let rc = match this {
                "blocking" => mpi::ffi::MPI_Barrier(comm),
                "nonblocking" => {
                    let mut r = mpi::ffi::RSMPI_REQUEST_NULL;
                    match mpi::ffi::MPI_Ibarrier(comm, &mut r) {
                        0 => mpi::ffi::MPI_Wait(&mut r, mpi::ffi::RSMPI_STATUS_IGNORE),
                        rc => rc,
                    }
                }
                "persistent" => match mpi::ffi::MPI_Start(&mut p) {
                    0 => mpi::ffi::MPI_Wait(&mut p, mpi::ffi::RSMPI_STATUS_IGNORE),
                    rc => rc,
                },
                other => panic!("unknown HWBARR_KIND {other}"),
            };
            if rc != 0 {
                failed = Some((k, rc));
                break;
            }
        }
        match failed {
            Some((k, rc)) => {
                let mut class = 0;
                mpi::ffi::MPI_Error_class(rc, &mut class);
                let mut buf = vec![0u8; 512];
                let mut len = 0;
                mpi::ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len);
                let text = String::from_utf8_lossy(&buf[..len.max(0) as usize]).into_owned();
                println!("rank {me}: p2pfault {kind}: error at barrier {k}: class {class} ({text})");
                if std::env::var("HWBARR_ON_ERROR").as_deref() == Ok("abort") {
                    mpi::ffi::MPI_Abort(world.as_raw(), 3);
                }
            }
            None => println!("rank {me}: p2pfault {kind}: no error in {iters} barriers"),
        }
        // The dup is broken now (its later barriers fail at once): one
        // more call says so without touching the network.
        if failed.is_some() {
            let rc = mpi::ffi::MPI_Barrier(comm);
            println!(
                "rank {me}: p2pfault: later barrier on the dup returns {}",
                if rc == 0 { "success" } else { "an error" }
            );
        }
        if p != mpi::ffi::RSMPI_REQUEST_NULL {
            // Inactive after its error or completion.
            mpi::ffi::MPI_Request_free(&mut p);
        }
    }
    world.barrier();
    drop(dup);
    world.barrier();
    println!("rank {me}: p2pfault done");
}

/// `overlap <rounds>`: see the module comment.
fn overlap(world: &SimpleCommunicator, rounds: u64) {
    use mpi::raw::AsRaw;
    let me = world.rank();
    for round in 0..rounds {
        let dup = world.duplicate();
        let mut value: i32 = if me == 0 { 1000 + round as i32 } else { -1 };
        let mut first = Raw::ibarrier(&dup);
        if me != 0 {
            first.wait();
        }
        let second = Raw::ibarrier(&dup);
        // SAFETY: MPI_REQUEST_NULL is a valid initial value; `value` stays
        // alive and untouched until the request completes below.
        let mut bcast = Raw(unsafe { mpi::ffi::RSMPI_REQUEST_NULL });
        // SAFETY: as above; live communicator, one MPI_INT at root 0.
        let rc = unsafe {
            mpi::ffi::MPI_Ibcast(
                (&mut value as *mut i32).cast(),
                1,
                mpi::ffi::RSMPI_INT32_T,
                0,
                dup.as_raw(),
                &mut bcast.0,
            )
        };
        assert_eq!(rc, 0);
        let mut reqs = if me == 0 { vec![first, second, bcast] } else { vec![second, bcast] };
        wait_all(&mut reqs);
        assert_eq!(value, 1000 + round as i32, "rank {me}: broadcast value in round {round}");
    }
    println!("rank {me}: overlap OK ({rounds} rounds)");
}

/// Collectives on an intercommunicator between the even and the odd
/// ranks: hwbarr must decline it, and the components that serve it
/// (coll/inter under the default selection and the list hwbarr
/// recommends) must get barrier, broadcast, scatter and allreduce right.
fn intercomm(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::{MPI_Allreduce, MPI_Barrier, MPI_Bcast, MPI_Scatter, RSMPI_INT32_T, RSMPI_PROC_NULL, RSMPI_SUM};
    use mpi::raw::AsRaw;
    /// MPI_ROOT, which rsmpi does not export (-4 in Open MPI's mpi.h).
    const MPI_ROOT: i32 = -4;
    let (me, n) = (world.rank(), world.size());
    let color = me % 2;
    let half = world.split_by_color(Color::with_value(color)).expect("split");
    let local = half.rank();
    // World ranks of the other group, in its local order.
    let remote: Vec<i32> = (0..n).filter(|r| r % 2 != color).collect();
    let mut inter = world.as_raw();
    // SAFETY: raw MPI calls on live communicators with buffers that outlive
    // each call; `inter` is an out-param freed below.
    unsafe {
        let rc = mpi::ffi::MPI_Intercomm_create(half.as_raw(), 0, world.as_raw(), 1 - color, 77, &mut inter);
        assert_eq!(rc, 0, "MPI_Intercomm_create");
        for round in 0..rounds as i32 {
            assert_eq!(MPI_Barrier(inter), 0);
            // Group 0's rank 0 is the root of the rooted collectives.
            let root = if color == 1 {
                0
            } else if local == 0 {
                MPI_ROOT
            } else {
                RSMPI_PROC_NULL
            };
            let mut v = if root == MPI_ROOT { 1000 + round } else { -1 };
            assert_eq!(MPI_Bcast((&mut v as *mut i32).cast(), 1, RSMPI_INT32_T, root, inter), 0);
            if color == 1 {
                assert_eq!(v, 1000 + round, "rank {me}: intercomm broadcast, round {round}");
            }
            let send: Vec<i32> = (0..remote.len() as i32).map(|i| 100 * round + i).collect();
            let mut got = -1;
            let rc = MPI_Scatter(
                send.as_ptr().cast(),
                1,
                RSMPI_INT32_T,
                (&mut got as *mut i32).cast(),
                1,
                RSMPI_INT32_T,
                root,
                inter,
            );
            assert_eq!(rc, 0, "MPI_Scatter");
            if color == 1 {
                assert_eq!(got, 100 * round + local, "rank {me}: intercomm scatter, round {round}");
            }
            // Each group gets the sum over the other group.
            let (mine, mut sum) = (me + round, -1);
            let rc = MPI_Allreduce(
                (&mine as *const i32).cast(),
                (&mut sum as *mut i32).cast(),
                1,
                RSMPI_INT32_T,
                RSMPI_SUM,
                inter,
            );
            assert_eq!(rc, 0, "MPI_Allreduce");
            let want: i32 = remote.iter().map(|r| r + round).sum();
            assert_eq!(sum, want, "rank {me}: intercomm allreduce, round {round}");
        }
        mpi::ffi::MPI_Comm_free(&mut inter);
    }
    println!("rank {me}: intercomm OK");
}

/// Communicators freed while a barrier on them is pending, the erroneous
/// free of a pending barrier's request, and MPI_Finalize with barriers in
/// flight. MPI_Comm_free only marks a communicator for deallocation:
/// pending operations on it complete normally (MPI 4.1, 7.4.3); freeing a
/// pending collective's request or cancelling it is erroneous and returns
/// an error (MPI_ERRORS_RETURN on MPI_COMM_WORLD, where MPI_Request_free
/// reports). `$HWBARR_LIFECYCLE`: `free-then-wait` (MPI_Comm_free, then
/// MPI_Wait), `request-free` (MPI_Request_free and MPI_Cancel refused,
/// MPI_Comm_free, MPI_Wait), `finalize` (as request-free, but the last
/// round's barrier is never waited for: MPI_Finalize with it in flight,
/// rank 0 late). `$HWBARR_FIRST`: the dup's first operation is the pending
/// one (`nonblocking`, `persistent`: the first exchange is in flight when
/// the communicator is freed), or a blocking barrier comes first
/// (`blocking`: the device, or the linear fallback, is set up).
fn lifecycle(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::*;
    use mpi::raw::AsRaw;
    let me = world.rank();
    let case = std::env::var("HWBARR_LIFECYCLE").unwrap_or_else(|_| "free-then-wait".into());
    let first = std::env::var("HWBARR_FIRST").unwrap_or_else(|_| "nonblocking".into());
    let mut rng = Rng(0x11FE_C1C1 ^ ((me as u64 + 9) * 0x9E37_79B9));
    // SAFETY: raw MPI calls on live communicators and requests of ours.
    unsafe {
        assert_eq!(MPI_Comm_set_errhandler(world.as_raw(), RSMPI_ERRORS_RETURN), 0);
        for round in 0..rounds {
            let mut d = RSMPI_COMM_NULL;
            assert_eq!(MPI_Comm_dup(world.as_raw(), &mut d), 0);
            assert_eq!(MPI_Comm_set_errhandler(d, RSMPI_ERRORS_RETURN), 0);
            if first == "blocking" {
                assert_eq!(MPI_Barrier(d), 0);
            }
            rng.delay();
            let last = round + 1 == rounds;
            if me == 0 && (last || rng.next().is_multiple_of(4)) {
                std::thread::sleep(std::time::Duration::from_millis(if last { 50 } else { 2 }));
            }
            let mut r = RSMPI_REQUEST_NULL;
            let persistent = first == "persistent";
            if persistent {
                assert_eq!(barrier_init::barrier_init(d, RSMPI_INFO_NULL, &mut r), 0);
                assert_eq!(MPI_Start(&mut r), 0);
            } else {
                assert_eq!(MPI_Ibarrier(d, &mut r), 0);
            }
            if case != "free-then-wait" {
                // Erroneous while the barrier is pending: refused, and the
                // request stays valid. (It may have completed already here
                // on a rank that came last: then the free is legal.)
                let mut flag = 0;
                assert_eq!(MPI_Request_get_status(r, &mut flag, RSMPI_STATUS_IGNORE), 0);
                if flag == 0 {
                    let mut copy = r;
                    let rc = MPI_Request_free(&mut copy);
                    assert_ne!(rc, 0, "rank {me}: MPI_Request_free of a pending barrier accepted");
                    assert!(copy == r, "rank {me}: a refused MPI_Request_free cleared the handle");
                    assert_ne!(MPI_Cancel(&mut r), 0, "rank {me}: MPI_Cancel of a pending barrier accepted");
                }
            }
            assert_eq!(MPI_Comm_free(&mut d), 0);
            if case == "finalize" && last {
                // Into MPI_Finalize with the barrier in flight.
                break;
            }
            rng.delay();
            assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0, "rank {me}: barrier on a freed communicator");
            if persistent {
                assert_eq!(MPI_Request_free(&mut r), 0);
            }
        }
    }
    println!("rank {me}: lifecycle {case} first={first} OK ({rounds} rounds)");
}

/// MPI_THREAD_MULTIPLE: `$HWBARR_THREADS` threads per rank (default 4),
/// each creating, using and freeing communicators of its own (dups of a
/// per-thread parent, so that every rank's thread k meets thread k), with
/// blocking and non-blocking barriers. With the device refused, every new
/// communicator's fallback message is printed while other threads print
/// theirs.
fn threads(world: &SimpleCommunicator, rounds: u64) {
    use mpi::ffi::*;
    use mpi::raw::AsRaw;
    /// A communicator handle moved into its thread (MPI_THREAD_MULTIPLE).
    struct Handle(MPI_Comm);
    // SAFETY: MPI handles may be used from any thread under
    // MPI_THREAD_MULTIPLE; each is used by one thread only.
    unsafe impl Send for Handle {}
    let me = world.rank();
    let n: usize = std::env::var("HWBARR_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let parents: Vec<Handle> = (0..n)
        .map(|_| {
            let mut c = world.as_raw();
            // SAFETY: a live communicator; `c` is an out-parameter.
            assert_eq!(unsafe { MPI_Comm_dup(world.as_raw(), &mut c) }, 0);
            Handle(c)
        })
        .collect();
    let joins: Vec<_> = parents
        .into_iter()
        .enumerate()
        .map(|(k, parent)| {
            std::thread::spawn(move || {
                let mut parent = parent;
                let mut rng = Rng(0x7EAD_0001 ^ (((me as u64 + 1) * 131 + k as u64) * 0x9E37_79B9));
                // SAFETY: raw MPI calls on this thread's own communicators.
                unsafe {
                    for _ in 0..rounds {
                        let mut d = parent.0;
                        assert_eq!(MPI_Comm_dup(parent.0, &mut d), 0);
                        rng.delay();
                        assert_eq!(MPI_Barrier(d), 0);
                        let mut r = RSMPI_REQUEST_NULL;
                        assert_eq!(MPI_Ibarrier(d, &mut r), 0);
                        assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0);
                        assert_eq!(MPI_Comm_free(&mut d), 0);
                    }
                    assert_eq!(MPI_Comm_free(&mut parent.0), 0);
                }
            })
        })
        .collect();
    for j in joins {
        j.join().expect("a thread failed");
    }
    println!("rank {me}: threads OK ({n} threads, {rounds} rounds)");
}

#[path = "support/barrier_init.rs"]
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

fn wait_any(reqs: &mut [Raw]) -> usize {
    let mut raw: Vec<_> = reqs.iter().map(|r| r.0).collect();
    let mut idx = 0;
    // SAFETY: our requests; status ignored.
    let rc =
        unsafe { mpi::ffi::MPI_Waitany(raw.len() as i32, raw.as_mut_ptr(), &mut idx, mpi::ffi::RSMPI_STATUS_IGNORE) };
    assert_eq!(rc, 0);
    for (r, x) in reqs.iter_mut().zip(raw) {
        r.0 = x;
    }
    idx as usize
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

fn nonblocking(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut rng = Rng(0xA5A5_5A5A ^ ((me as u64 + 7) * 0x9E37_79B9));
    let mut ts: Vec<Tested> = (0..3).map(|s| Tested::new(world.duplicate(), s, me)).collect();
    for i in 0..iters {
        // Three communicators at once, completed in a random order.
        let mut reqs = Vec::new();
        for t in ts.iter_mut() {
            rng.delay();
            t.count += 1;
            board.cell(t.slot, me).store(t.count, SeqCst);
            reqs.push(Raw::ibarrier(&t.comm));
        }
        match rng.next() % 4 {
            0 => {
                let mut order: Vec<usize> = (0..3).collect();
                order.rotate_left((rng.next() % 3) as usize);
                for k in order {
                    reqs[k].wait();
                    check_after(&ts[k], &board, me, ts[k].count);
                }
            }
            1 => {
                let mut left = 3;
                while left > 0 {
                    for k in 0..3 {
                        // SAFETY: comparing handles only.
                        if reqs[k].0 != unsafe { mpi::ffi::RSMPI_REQUEST_NULL } && reqs[k].test() {
                            check_after(&ts[k], &board, me, ts[k].count);
                            left -= 1;
                        }
                    }
                }
            }
            2 => {
                for _ in 0..3 {
                    let k = wait_any(&mut reqs);
                    check_after(&ts[k], &board, me, ts[k].count);
                }
            }
            _ => {
                wait_all(&mut reqs);
                for t in &ts {
                    check_after(t, &board, me, t.count);
                }
            }
        }
        // Ibarrier then blocking barrier on one communicator, then two
        // ibarriers outstanding on it.
        let t = &mut ts[(i % 3) as usize];
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        let mut r = Raw::ibarrier(&t.comm);
        rng.delay();
        t.checked_barrier(&board, me);
        r.wait();
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        let mut two = vec![Raw::ibarrier(&t.comm)];
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        two.push(Raw::ibarrier(&t.comm));
        rng.delay();
        wait_all(&mut two);
        check_after(t, &board, me, t.count);
    }
    println!("rank {me}: nonblocking OK");
}

fn persistent(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut rng = Rng(0x1234_5678 ^ ((me as u64 + 3) * 0x9E37_79B9));
    let mut t = Tested::new(world.duplicate(), 0, me);
    // Inactive requests: waiting returns at once; freeing without a start.
    let mut idle = Raw::persistent(&t.comm);
    idle.wait();
    idle.free();
    let mut p = Raw::persistent(&t.comm);
    for i in 0..iters {
        rng.delay();
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        p.start();
        if i % 2 == 0 {
            p.wait();
        } else {
            while !p.test() {}
        }
        check_after(&t, &board, me, t.count);
        if i % 100 == 0 {
            p.wait(); // inactive again: returns at once
            t.checked_barrier(&board, me); // blocking barrier between starts
        }
    }
    p.free();
    println!("rank {me}: persistent OK ({} starts)", iters);
}

fn rss_kib() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn leak(world: &SimpleCommunicator, ops: u64) {
    let c = world.duplicate();
    let mut p = Raw::persistent(&c);
    // Warm up allocators and the device before measuring.
    for _ in 0..1000 {
        Raw::ibarrier(&c).wait();
        p.start();
        p.wait();
    }
    let (segs0, fds0) = segments_and_fds();
    let rss0 = rss_kib();
    for i in 0..ops / 2 {
        Raw::ibarrier(&c).wait();
        p.start();
        if i % 2 == 0 {
            p.wait()
        } else {
            while !p.test() {}
        }
    }
    p.free();
    let (segs1, fds1) = segments_and_fds();
    let rss1 = rss_kib();
    if world.rank() == 0 {
        println!("leak: ops {ops} segs {segs0}->{segs1} fds {fds0}->{fds1} rss_kib {rss0}->{rss1}");
    }
}

/// `pvar <iters>`: reads hwbarr's MPI_T performance variable
/// `coll_hwbarr_barriers` bound to a fresh dup (after `iters` MPI_Barrier
/// and `iters` MPI_Ibarrier on it) and to MPI_COMM_SELF (never served by
/// hwbarr), and prints both values.
fn pvar(world: &SimpleCommunicator, iters: u64) {
    use mpi::ffi::*;
    use mpi::raw::AsRaw;
    let me = world.rank();
    let mut provided = 0;
    // SAFETY: plain MPI_T calls with valid out-pointers; handles are used
    // only while their communicators live, then freed.
    unsafe {
        assert_eq!(MPI_T_init_thread(RSMPI_THREAD_SINGLE, &mut provided), 0);
        let mut idx = -1;
        let rc = MPI_T_pvar_get_index(c"coll_hwbarr_barriers".as_ptr(), MPI_T_PVAR_CLASS_COUNTER as i32, &mut idx);
        if rc != 0 {
            println!("rank {me}: pvar coll_hwbarr_barriers missing (rc {rc})");
            MPI_T_finalize();
            return;
        }
        let d = world.duplicate();
        let mut session: MPI_T_pvar_session = std::mem::zeroed();
        assert_eq!(MPI_T_pvar_session_create(&mut session), 0);
        let bind = |mut comm: MPI_Comm| {
            let mut h: MPI_T_pvar_handle = std::mem::zeroed();
            let mut count = 0;
            let rc = MPI_T_pvar_handle_alloc(session, idx, (&mut comm as *mut MPI_Comm).cast(), &mut h, &mut count);
            assert_eq!((rc, count), (0, 1), "handle alloc");
            h
        };
        let read = |h: MPI_T_pvar_handle| {
            let mut v: u64 = u64::MAX;
            assert_eq!(MPI_T_pvar_read(session, h, (&mut v as *mut u64).cast()), 0, "pvar read");
            v
        };
        let hd = bind(d.as_raw());
        let hs = bind(RSMPI_COMM_SELF);
        let at_bind = read(hd);
        for _ in 0..iters {
            d.barrier();
        }
        for _ in 0..iters {
            let mut r = RSMPI_REQUEST_NULL;
            assert_eq!(MPI_Ibarrier(d.as_raw(), &mut r), 0);
            assert_eq!(MPI_Wait(&mut r, RSMPI_STATUS_IGNORE), 0);
        }
        MPI_Barrier(RSMPI_COMM_SELF);
        println!("rank {me}: pvar dup={} self={} at_bind={at_bind}", read(hd), read(hs));
        let (mut hd, mut hs) = (hd, hs);
        MPI_T_pvar_handle_free(session, &mut hd);
        MPI_T_pvar_handle_free(session, &mut hs);
        MPI_T_pvar_session_free(&mut session);
        MPI_T_finalize();
    }
}

/// Ordering A on `t`, `lead` doing Ibarrier, Barrier, Wait and the others
/// Ibarrier, a sleep, Wait, Barrier: legal, since the ibarrier matches the
/// ibarrier and the barrier the barrier.
fn order_a(t: &mut Tested, board: &Board, me: usize, lead: usize, nap_us: u64) {
    t.count += 1;
    let k = t.count;
    board.cell(t.slot, me).store(k, SeqCst);
    let mut r = Raw::ibarrier(&t.comm);
    if t.comm.rank() as usize == lead {
        t.checked_barrier(board, me);
        r.wait();
        check_after(t, board, me, k);
    } else {
        std::thread::sleep(std::time::Duration::from_micros(nap_us));
        r.wait();
        check_after(t, board, me, k);
        t.checked_barrier(board, me);
    }
}

fn first(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    let kind = std::env::var("HWBARR_FIRST").unwrap_or_else(|_| "order-a".into());
    let mut rng = Rng(0x5EED_0001 ^ ((me as u64 + 5) * 0x9E37_79B9));
    let mut t = Tested::new(world.duplicate(), 0, me);
    let mut p = Raw::persistent(&t.comm);
    let start = |t: &mut Tested, p: &mut Raw| {
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        p.start();
        p.wait();
        check_after(t, &board, me, t.count);
    };
    let ibarrier = |t: &mut Tested| {
        t.count += 1;
        board.cell(t.slot, me).store(t.count, SeqCst);
        Raw::ibarrier(&t.comm).wait();
        check_after(t, &board, me, t.count);
    };
    match kind.as_str() {
        "blocking" => t.checked_barrier(&board, me),
        "nonblocking" => ibarrier(&mut t),
        "persistent" => start(&mut t, &mut p),
        "order-a" => order_a(&mut t, &board, me, 0, 20_000),
        other => panic!("unknown HWBARR_FIRST {other}"),
    }
    for i in 0..iters {
        rng.delay();
        match i % 5 {
            0 => t.checked_barrier(&board, me),
            1 => ibarrier(&mut t),
            2 => start(&mut t, &mut p),
            3 => order_a(&mut t, &board, me, (i as usize / 5) % n, rng.next() % 300),
            _ => {
                // Two outstanding, then a blocking barrier before waiting;
                // one rank rushes through while the others come late.
                if me != (i as usize / 5) % n {
                    std::thread::sleep(std::time::Duration::from_micros(rng.next() % 2000));
                }
                let mut two = Vec::new();
                for _ in 0..2 {
                    t.count += 1;
                    board.cell(t.slot, me).store(t.count, SeqCst);
                    two.push(Raw::ibarrier(&t.comm));
                }
                let k = t.count;
                t.checked_barrier(&board, me);
                wait_all(&mut two);
                check_after(&t, &board, me, k);
            }
        }
    }
    p.free();
    println!("rank {me}: first {kind} OK ({} barriers)", t.count);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("semantics");
    let arg: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let universe = if mode == "threads" {
        let (u, level) = mpi::initialize_with_threading(mpi::Threading::Multiple).expect("MPI_Init_thread");
        assert_eq!(level, mpi::Threading::Multiple, "MPI_THREAD_MULTIPLE");
        u
    } else {
        mpi::initialize().expect("MPI_Init")
    };
    let world = universe.world();
    match mode {
        "semantics" => semantics(&world, arg),
        "progress" => progress(&world, arg),
        "churn" => churn(&world, arg),
        "die" => die(&world, arg),
        "p2pfault" => p2pfault(&world, arg),
        "soak" => soak(&world, arg),
        "intercomm" => intercomm(&world, arg),
        "nonblocking" => nonblocking(&world, arg),
        "persistent" => persistent(&world, arg),
        "leak" => leak(&world, arg),
        "pvar" => pvar(&world, arg),
        "first" => first(&world, arg),
        "overlap" => overlap(&world, arg),
        "lifecycle" => lifecycle(&world, arg),
        "threads" => threads(&world, arg),
        other => panic!("unknown mode {other}"),
    }
}

/// Mappings of this process (lines of /proc/self/maps).
fn maps_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).unwrap_or(0)
}

/// A communicator of the soak: the board check, and its persistent barrier.
struct Soaked {
    t: Tested,
    p: Raw,
}

impl Soaked {
    /// `comm` takes board slot `slot`, whose counts go on from the largest
    /// any member left there (slots are reused by short-lived communicators).
    fn new(comm: SimpleCommunicator, slot: usize, me: usize, board: &Board) -> Soaked {
        let mut t = Tested::new(comm, slot, me);
        let mine = board.cell(slot, me).load(SeqCst);
        let mut base = 0u64;
        t.comm.all_reduce_into(&mine, &mut base, SystemOperation::max());
        board.cell(slot, me).store(base, SeqCst);
        t.count = base;
        let p = Raw::persistent(&t.comm);
        Soaked { t, p }
    }

    /// Counts the next barrier as entered on the board.
    fn enter(&mut self, board: &Board, me: usize) -> u64 {
        self.t.count += 1;
        board.cell(self.t.slot, me).store(self.t.count, SeqCst);
        self.t.count
    }
}

impl Drop for Soaked {
    fn drop(&mut self) {
        self.p.free();
    }
}

/// `soak <barriers>`: at least `barriers` barriers per rank on
/// MPI_COMM_WORLD, two long-lived dups and up to 8 short-lived
/// communicators (dups and an even/odd split, created and freed at random),
/// each barrier blocking, MPI_Ibarrier + Wait/Test, persistent Start +
/// Wait, or ibarriers on two communicators completed in a random order.
/// Every completion is checked on the board. Which communicator and kind
/// come next is the same on every rank (a shared seed); delays and how
/// requests complete differ per rank. Resident memory, mappings and fds
/// are read after a warm-up (a tenth of the run) and at the end, with the
/// same communicators alive (the short-lived ones freed) both times.
fn soak(world: &SimpleCommunicator, barriers: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size();
    let mut shared = Rng(0x50AC_0001);
    let mut mine = Rng(0x50AC_1000 ^ ((me as u64 + 9) * 0x9E37_79B9));
    let started = std::time::Instant::now();
    let world_dup = world.duplicate();
    let mut fixed: Vec<Soaked> = Vec::new();
    fixed.push(Soaked::new(world_dup, 0, me, &board));
    for s in 1..3 {
        fixed.push(Soaked::new(world.duplicate(), s, me, &board));
    }
    // Short-lived: slot 4 + i; None when free.
    let mut temp: Vec<Option<Soaked>> = (0..8).map(|_| None).collect();
    let (mut blocking, mut nonblocking, mut persistent, mut created, mut done) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let warmup = barriers / 10;
    let mut before: Option<(usize, usize, usize)> = None;
    let figures = || (rss_kib(), maps_count(), std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0));
    while done < barriers {
        if before.is_none() && done >= warmup {
            temp.iter_mut().for_each(|t| *t = None);
            world.barrier();
            before = Some(figures());
        }
        let x = shared.next();
        // Now and then, create or free a short-lived communicator.
        if x.is_multiple_of(1500) {
            let i = ((x >> 16) % 8) as usize;
            if temp[i].take().is_none() {
                let comm = if (x >> 24).is_multiple_of(3) {
                    world.split_by_color(Color::with_value((me % 2) as i32)).expect("split")
                } else {
                    world.duplicate()
                };
                temp[i] = Some(Soaked::new(comm, 4 + i, me, &board));
                created += 1;
            }
            continue;
        }
        // The communicator: a long-lived one, or a live short-lived one.
        let pick = ((x >> 8) % 11) as usize;
        let kind = (x >> 32) % 8;
        let c: &mut Soaked = if pick < 3 {
            &mut fixed[pick]
        } else {
            match temp[pick - 3].as_mut() {
                Some(c) => c,
                None => &mut fixed[pick % 3],
            }
        };
        if mine.next().is_multiple_of(16) {
            mine.delay();
        }
        match kind {
            0..=2 => {
                c.t.checked_barrier(&board, me);
                blocking += 1;
            }
            3..=4 => {
                let k = c.enter(&board, me);
                let mut r = Raw::ibarrier(&c.t.comm);
                if mine.next().is_multiple_of(2) {
                    r.wait();
                } else {
                    while !r.test() {}
                }
                check_after(&c.t, &board, me, k);
                nonblocking += 1;
            }
            5..=6 => {
                let k = c.enter(&board, me);
                c.p.start();
                if mine.next().is_multiple_of(2) {
                    c.p.wait();
                } else {
                    while !c.p.test() {}
                }
                check_after(&c.t, &board, me, k);
                persistent += 1;
            }
            _ => {
                // This one and a long-lived other, completed in a random order.
                let k1 = c.enter(&board, me);
                let mut r1 = Raw::ibarrier(&c.t.comm);
                let slot1 = c.t.slot;
                let o = &mut fixed[((x >> 40) % 3) as usize];
                if o.t.slot == slot1 {
                    r1.wait();
                    check_after(&o.t, &board, me, k1);
                    nonblocking += 1;
                } else {
                    let k2 = o.enter(&board, me);
                    let mut r2 = Raw::ibarrier(&o.t.comm);
                    if mine.next().is_multiple_of(2) {
                        r2.wait();
                        r1.wait();
                    } else {
                        r1.wait();
                        r2.wait();
                    }
                    check_after(&o.t, &board, me, k2);
                    let c: &Soaked =
                        if pick < 3 { &fixed[pick] } else { temp[pick - 3].as_ref().unwrap_or(&fixed[pick % 3]) };
                    check_after(&c.t, &board, me, k1);
                    nonblocking += 2;
                }
            }
        }
        done = blocking + nonblocking + persistent;
    }
    temp.iter_mut().for_each(|t| *t = None);
    world.barrier();
    let after = figures();
    let before = before.unwrap_or(after);
    println!(
        "rank {me} of {n}: soak OK: {done} barriers ({blocking} blocking, {nonblocking} non-blocking, {persistent} persistent), \
         {created} communicators created, {:.1} s; rss_kib {}->{} maps {}->{} fds {}->{}",
        started.elapsed().as_secs_f64(),
        before.0,
        after.0,
        before.1,
        after.1,
        before.2,
        after.2
    );
}
