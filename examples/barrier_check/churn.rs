//! `churn <live>`: `live` communicators alive at once, each used for a
//! barrier, then all freed, twice; prints how many hwbarr segments this
//! process maps at each point.

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
        if world.rank() == 0 {
            println!("churn round {round}: base {base} live {alive} after {after} fds {base_fds}->{fds}");
        }
    }
}
