//! `first <iters>`: on a fresh dup of MPI_COMM_WORLD, the first barrier is
//! of the kind $HWBARR_FIRST names — `blocking`, `nonblocking`,
//! `persistent`, or `order-a` (rank 0: Ibarrier, Barrier, Wait; the others:
//! Ibarrier, sleep 20 ms, Wait, Barrier) — then `iters` rounds of, in turn,
//! a blocking barrier, an ibarrier, a persistent start, order-a with a
//! rotating first rank, and two outstanding ibarriers with a blocking
//! barrier before they are waited for; every completion checked on the
//! board. The first barrier is the one that runs the ranks' first exchange,
//! so the tests run it where that exchange decides something: the device
//! refused on every rank or on some (tests/fault_preload.c), where every
//! rank falls back to hwbarr's linear barrier; the linear barrier asked
//! for; ranks that disagree on the algorithm (MPMD launches).

use crate::*;

/// Ordering A on `t`, `lead` doing Ibarrier, Barrier, Wait and the others
/// Ibarrier, a sleep, Wait, Barrier: legal, since the ibarrier matches the
/// ibarrier and the barrier the barrier.
fn order_a(t: &mut Tested, board: &Board, me: usize, lead: usize, nap_us: u64) {
    let k = t.enter(board, me);
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

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    let kind = std::env::var("HWBARR_FIRST").unwrap_or_else(|_| "order-a".into());
    let mut rng = Rng(0x5EED_0001 ^ ((me as u64 + 5) * 0x9E37_79B9));
    let mut t = Tested::new(world.duplicate(), 0, me);
    let mut p = Raw::persistent(&t.comm);
    let start = |t: &mut Tested, p: &mut Raw| {
        t.enter(&board, me);
        p.start();
        p.wait();
        check_after(t, &board, me, t.count);
    };
    let ibarrier = |t: &mut Tested| {
        t.enter(&board, me);
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
                    t.enter(&board, me);
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
