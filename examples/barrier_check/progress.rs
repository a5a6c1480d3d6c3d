//! `progress <rounds>`: one rank posts a large MPI_Isend then enters
//! MPI_Barrier, its peer posts the matching MPI_Recv then enters the
//! barrier. Only a barrier that turns MPI progress while waiting finishes.

use crate::*;

pub fn run(world: &SimpleCommunicator, rounds: u64) {
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
