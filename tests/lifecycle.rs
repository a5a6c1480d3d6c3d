//! Lifetimes: communicators freed with barriers pending, erroneous frees, MPI_Finalize with
//! barriers in flight, threads that print.

mod common;
use common::*;

/// MPI_Comm_free while an MPI_Ibarrier or a started persistent barrier on
/// the communicator is pending, then MPI_Wait: the barrier completes, no
/// rank touches freed memory. Pending first exchanges (first operation
/// non-blocking or persistent), device barriers and hwbarr's linear
/// barriers (device refused, or `linear`), at 2, 3 and 4 ranks.
#[test]
fn communicator_freed_with_a_barrier_pending() {
    for np in [2, 3, 4] {
        for alg in ["auto", "toggle", "counter", "linear"] {
            for first in ["nonblocking", "persistent", "blocking"] {
                for refused in [false, true] {
                    let job = lifecycle_job(np, alg, "free-then-wait", first, refused, 20);
                    let what = format!("np {np}, {alg}, first {first}, device refused: {refused}");
                    assert!(job.ok() && !job.timed_out(), "{what}: {}", job.dump());
                    assert_eq!(job.stdout().matches("lifecycle free-then-wait").count(), np, "{what}: {}", job.dump());
                }
            }
        }
    }
}

/// MPI_Request_free and MPI_Cancel on a pending hwbarr barrier are
/// refused with an error (as libnbc refuses them); the request stays valid
/// and completes after MPI_Comm_free. `finalize`: the last barrier is
/// never waited for, rank 0 comes late, and MPI_Finalize ends the job
/// cleanly with nothing left in /dev/shm.
#[test]
fn erroneous_frees_are_refused_and_finalize_with_barriers_in_flight_ends_cleanly() {
    let before = shm_names();
    for case in ["request-free", "finalize"] {
        for np in [2, 3, 4] {
            for first in ["nonblocking", "persistent", "blocking"] {
                for refused in [false, true] {
                    let job = lifecycle_job(np, "auto", case, first, refused, 10);
                    let what = format!("{case}, np {np}, first {first}, device refused: {refused}");
                    assert!(job.ok() && !job.timed_out(), "{what}: {}", job.dump());
                    assert_eq!(
                        job.stdout().matches(&format!("lifecycle {case}")).count(),
                        np,
                        "{what}: {}",
                        job.dump()
                    );
                }
            }
        }
    }
    let left: Vec<_> = shm_names().into_iter().filter(|n| !before.contains(n)).collect();
    assert!(left.iter().all(|n| !n.contains("hwbarr")), "left in /dev/shm: {left:?}");
}

/// The point-to-point transport for the MPI_THREAD_MULTIPLE job whose
/// threads create communicators at once. Open MPI 6.0.0a1's shared-memory
/// BTL loses a message when two threads of a process send to the same peer
/// at once (its fast boxes: docs/testing.md); hwbarr's own sends take
/// turns, but Open MPI's own messages for the communicators the threads
/// create do not, and hang this program now and then without hwbarr too (3
/// of 60 runs with `--mca coll ^hwbarr`; 0 of 60 on 5.0.10, and 0 of 60 on
/// 6.0.0a1 over `self,tcp`): on 6.0 the job runs over TCP on loopback.
fn threads_transport() -> Vec<(&'static str, &'static str)> {
    if ompi_major() >= 6 {
        vec![("btl", "self,tcp"), ("btl_tcp_if_include", "lo")]
    } else {
        vec![(rte::single_copy_param(), "none")]
    }
}

/// MPI_THREAD_MULTIPLE: 4 threads per rank run the first barriers of
/// their own communicators at once, 2,000 rounds (`setups`: the main thread
/// makes the dups, so that only hwbarr's messages leave threads at once),
/// on Open MPI's shared-memory transport, every barrier checked on the
/// board. The threads' setup exchanges send to the same peer at once: on
/// 6.0.0a1, before hwbarr's sends took turns, 10 of 10 launches of 2,000
/// rounds hung in a first barrier (docs/testing.md).
#[test]
fn threads_setting_up_their_communicators_at_once_do_not_hang() {
    for np in [2, 3] {
        let b = board();
        let board_env = [("HWBARR_BOARD", b.to_str().unwrap()), ("HWBARR_THREADS", "4")];
        let job = run(launch_cmd(np, &[], &[], &board_env, &["setups", "2000"], 120), 120);
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        let what = format!("np {np}");
        assert!(job.ok() && !job.timed_out(), "{what}: {}", job.dump());
        assert_eq!(job.stdout().matches("setups OK").count(), np, "{what}: {}", job.dump());
    }
}

/// MPI_THREAD_MULTIPLE: 4 threads per rank creating and freeing
/// communicators; with the device refused every new communicator's rank 0
/// prints its fallback message while other threads print theirs, each
/// message whole and once (Open MPI's help system is not thread-safe: two
/// threads rendering at once crashed in its parser).
#[test]
fn threads_creating_communicators_print_safely() {
    for np in [2, 3, 4] {
        for refused in [false, true] {
            let mut launch = if refused { fault_launch("memfd", "all", "blocking") } else { vec![] };
            launch.extend(["-x".into(), "HWBARR_THREADS=4".into()]);
            let launch: Vec<&str> = launch.iter().map(String::as_str).collect();
            let job = run(
                launch_cmd(
                    np,
                    &launch,
                    &threads_transport(),
                    &[("HWBARR_BOARD", "/dev/null")],
                    &["threads", "10"],
                    180,
                ),
                180,
            );
            let what = format!("np {np}, device refused: {refused}");
            assert!(job.ok() && !job.timed_out(), "{what}: {}", job.dump());
            assert_eq!(job.stdout().matches("threads OK").count(), np, "{what}: {}", job.dump());
            let n = fallback_lines(&job.stderr()).len();
            if refused {
                // The 4×10 dups that ran barriers (the device is set up at
                // a communicator's first barrier): one whole message each.
                assert_eq!(n, 40, "{what}: {}", job.dump());
                let body = "hwbarr could not set up its shared-memory segment";
                assert_eq!(job.stderr().matches(body).count(), 40, "{what}: {}", job.dump());
            } else {
                assert_eq!(n, 0, "{what}: {}", job.dump());
            }
        }
    }
}
