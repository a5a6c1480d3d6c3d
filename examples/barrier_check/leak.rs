//! `leak <ops>`: that many ibarriers and persistent starts; prints the
//! process's hwbarr mappings, fds and resident memory before and after.

use crate::*;

pub fn run(world: &SimpleCommunicator, ops: u64) {
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
