//! LogP-style message costs between world ranks 0 and 1 (put them on two
//! nodes), for the scale model in `make bench`. Prints on rank 0:
//! `rtt_us=<round trip> o_us=<send overhead> g_us=<gap> L_us=<latency>`.
//! - rtt: zero-byte ping-pong round trip;
//! - o: time to post one zero-byte MPI_Isend;
//! - g: time per message in a long burst of zero-byte sends;
//! - L = rtt/2 - 2o.
//!
//! Other ranks only take part in the final barrier.

use mpi::traits::*;

fn main() {
    let iters: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let universe = mpi::initialize().expect("MPI_Init");
    let world = universe.world();
    let me = world.rank();
    let empty: [u8; 0] = [];
    let mut sink: [u8; 0] = [];
    if me < 2 {
        let peer = world.process_at_rank(1 - me);
        // Round trip: warm-up, then timed.
        let mut ping_pong = |n: usize| {
            for _ in 0..n {
                if me == 0 {
                    peer.send(&empty[..]);
                    peer.receive_into(&mut sink[..]);
                } else {
                    peer.receive_into(&mut sink[..]);
                    peer.send(&empty[..]);
                }
            }
        };
        ping_pong(iters / 10);
        let t0 = mpi::time();
        ping_pong(iters);
        let rtt = (mpi::time() - t0) * 1e6 / iters as f64;
        // Overhead of posting a send, and the gap in a burst.
        let (mut post, mut burst) = (0.0, 0.0);
        for _ in 0..20 {
            let n = 100;
            if me == 0 {
                mpi::request::scope(|scope| {
                    let t = mpi::time();
                    let reqs: Vec<_> = (0..n).map(|_| peer.immediate_send(scope, &empty[..])).collect();
                    post += (mpi::time() - t) / n as f64;
                    for r in reqs {
                        r.wait();
                    }
                    burst += (mpi::time() - t) / n as f64;
                });
                peer.receive_into(&mut sink[..]);
            } else {
                for _ in 0..n {
                    peer.receive_into(&mut sink[..]);
                }
                peer.send(&empty[..]);
            }
        }
        let (o, g) = (post * 1e6 / 20.0, burst * 1e6 / 20.0);
        if me == 0 {
            let l = (rtt / 2.0 - 2.0 * o).max(0.0);
            println!("rtt_us={rtt:.3} o_us={o:.3} g_us={g:.3} L_us={l:.3}");
        }
    }
    world.barrier();
}
