//! `absent <rounds>`: in each round every rank starts a non-blocking
//! barrier (MPI_Ibarrier, or the persistent barrier every other turn), and
//! then all but one rank "compute": they make no MPI call until that rank
//! has completed the barrier (it says so on the board). That rank starts
//! its barrier last, once the others said on the board that they started. MPI's progress rule
//! lets such a barrier wait for the absent ranks; hwbarr's designs do not
//! need to: a barrier that every rank entered completes for the ranks that
//! test it (the last arrival releases, or a waiter reads for the leaders).
//! A round whose present rank has not completed within 3 s is reported
//! ("ABSENT: ..."), and the absent ranks then call MPI, so that the job
//! runs on and ends either way. The present rank goes round the communicator.

use crate::*;

/// Board slot of the present rank's "done" marks (column 0: the round).
const DONE_SLOT: usize = SLOTS - 1;
/// Board slot where each rank marks the round whose barrier it started.
const STARTED_SLOT: usize = SLOTS - 2;

/// One board row, a cell per world rank.
struct Row<'a>(&'a Board, usize);

impl Row<'_> {
    fn cell(&self, rank: usize) -> &AtomicU64 {
        self.0.cell(self.1, rank)
    }
}

pub fn run(world: &SimpleCommunicator, rounds: u64) {
    let board = Board::open();
    let me = world.rank() as usize;
    let n = world.size() as usize;
    let mut t = Tested::new(world.duplicate(), 0, me);
    let mut p = Raw::persistent(&t.comm);
    let done = board.cell(DONE_SLOT, 0);
    let started = Row(&board, STARTED_SLOT);
    let mut late = 0;
    // Start-to-completion times of this rank's present rounds (ns).
    let mut took = Vec::new();
    for round in 1..=rounds {
        let present = (round as usize) % n;
        // Each rank is present once per n rounds, with the kinds alternating
        // between those turns.
        let persistent = (round / n as u64) % 2 == 1;
        // A blocking barrier first, so that the absent ranks are in this
        // round's computation before the present rank could finish.
        t.checked_barrier(&board, me);
        let k = t.enter(&board, me);
        let start = |p: &mut Raw| {
            if persistent {
                p.start();
                None
            } else {
                Some(Raw::ibarrier(&t.comm))
            }
        };
        if me == present {
            // Last to enter, so that the leaders' looks at their arrival
            // found this rank missing and nobody but us is in MPI after.
            let since = std::time::Instant::now();
            while (0..n).any(|q| q != me && started.cell(q).load(SeqCst) < round) {
                assert!(since.elapsed().as_secs() < 60, "rank {me}: the others never started round {round}");
                std::thread::yield_now();
            }
            let t0 = std::time::Instant::now();
            let mut ib = start(&mut p);
            ib.as_mut().unwrap_or(&mut p).wait();
            took.push(t0.elapsed().as_nanos() as u64);
            check_after(&t, &board, me, k);
            done.store(round, SeqCst);
        } else {
            let mut ib = start(&mut p);
            started.cell(me).store(round, SeqCst);
            let since = std::time::Instant::now();
            while done.load(SeqCst) < round {
                if since.elapsed() > std::time::Duration::from_secs(3) {
                    eprintln!(
                        "ABSENT: world rank {me}, round {round}: rank {present}'s {} barrier not complete after 3 s \
                         without MPI calls of the others",
                        if persistent { "persistent" } else { "non-blocking" }
                    );
                    late += 1;
                    break;
                }
                std::hint::spin_loop();
                std::thread::yield_now();
            }
            ib.as_mut().unwrap_or(&mut p).wait();
            check_after(&t, &board, me, k);
        }
    }
    p.free();
    if late == 0 {
        took.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        let spread = match (took.first(), took.get(took.len() / 2), took.last()) {
            (Some(&lo), Some(&mid), Some(&hi)) => {
                format!(
                    "; present in {}: start to completion {:.2} us median [{:.2}-{:.2}]",
                    took.len(),
                    us(mid),
                    us(lo),
                    us(hi)
                )
            }
            _ => String::new(),
        };
        println!("rank {me}: absent OK ({rounds} rounds{spread})");
    }
}
