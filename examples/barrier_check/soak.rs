//! `soak <barriers>`: at least `barriers` barriers per rank on
//! MPI_COMM_WORLD, two long-lived dups and up to 8 short-lived
//! communicators (dups and an even/odd split, created and freed at random),
//! each barrier blocking, MPI_Ibarrier + Wait/Test, persistent Start +
//! Wait, or ibarriers on two communicators completed in a random order.
//! Every completion is checked on the board. Which communicator and kind
//! come next is the same on every rank (a shared seed); delays and how
//! requests complete differ per rank. Resident memory, mappings and fds
//! are read after a warm-up (a tenth of the run) and at the end, with the
//! same communicators alive (the short-lived ones freed) both times.

use crate::*;

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
        self.t.enter(board, me)
    }
}

impl Drop for Soaked {
    fn drop(&mut self) {
        self.p.free();
    }
}

pub fn run(world: &SimpleCommunicator, barriers: u64) {
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
