//! `p2pfault <iters>`: on a dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
//! `iters` barriers of the kind HWBARR_KIND names (`blocking`,
//! `nonblocking`, `persistent`, or `mixed`: the three in turn), meant to
//! run with HWBARR_FAULT_P2P (a component built with the
//! `fault-injection` feature). A rank that gets an error prints its class
//! and stops using the dup; then, with HWBARR_ON_ERROR=abort, it calls
//! MPI_Abort; otherwise every rank meets in a barrier on MPI_COMM_WORLD,
//! frees the dup and finalizes.

use crate::*;

pub fn run(world: &SimpleCommunicator, iters: u64) {
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
