//! `churn <live>`: `live` communicators alive at once, each used for a
//! barrier, then all freed, twice; each rank prints how many hwbarr
//! segments it maps at each point, and its fds.

use crate::*;

pub fn run(world: &SimpleCommunicator, live: u64) {
    world.barrier();
    let (base, base_fds) = segments_and_fds();
    for round in 0..2 {
        let comms: Vec<_> = (0..live).map(|_| world.duplicate()).collect();
        comms.iter().for_each(|c| c.barrier());
        let (alive, _) = segments_and_fds();
        drop(comms);
        world.barrier();
        let (after, fds) = segments_and_fds();
        let r = world.rank();
        println!("churn round {round} rank {r}: base {base} live {alive} after {after} fds {base_fds}->{fds}");
    }
}
