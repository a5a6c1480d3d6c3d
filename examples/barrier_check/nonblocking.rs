//! `nonblocking <iters>`: MPI_Ibarrier on three communicators at once,
//! completed in a random order per rank (Wait, Test loops, Waitany,
//! Waitall); ibarrier then blocking barrier on one communicator; two
//! ibarriers outstanding on one communicator; all checked on the board.

use crate::*;

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

pub fn run(world: &SimpleCommunicator, iters: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let mut rng = Rng(0xA5A5_5A5A ^ ((me as u64 + 7) * 0x9E37_79B9));
    let mut ts: Vec<Tested> = (0..3).map(|s| Tested::new(world.duplicate(), s, me)).collect();
    for i in 0..iters {
        // Three communicators at once, completed in a random order.
        let mut reqs = Vec::new();
        for t in ts.iter_mut() {
            rng.delay();
            t.enter(&board, me);
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
        t.enter(&board, me);
        let mut r = Raw::ibarrier(&t.comm);
        rng.delay();
        t.checked_barrier(&board, me);
        r.wait();
        t.enter(&board, me);
        let mut two = vec![Raw::ibarrier(&t.comm)];
        t.enter(&board, me);
        two.push(Raw::ibarrier(&t.comm));
        rng.delay();
        wait_all(&mut two);
        check_after(t, &board, me, t.count);
    }
    println!("rank {me}: nonblocking OK");
}
