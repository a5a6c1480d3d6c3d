//! `die <after>`: world rank 1 SIGKILLs itself in the middle of barriers;
//! with HWBARR_DIE=kill|abort one rank dies (SIGKILL or MPI_Abort) while
//! the others wait in MPI_Barrier, MPI_Wait on an MPI_Ibarrier or on a
//! persistent barrier (HWBARR_DIE_WAIT), after writing the time of its
//! death to HWBARR_DIE_STAMP (see `die_while_others_wait`).

use crate::*;

pub fn run(world: &SimpleCommunicator, after: u64) {
    let how = std::env::var("HWBARR_DIE").unwrap_or_else(|_| "inside".into());
    if how != "inside" {
        return die_while_others_wait(world, after, &how);
    }
    let me = world.rank();
    for i in 0..after {
        world.barrier();
        if i + 1 == after && me == 1 {
            // Killed while waiting inside the next barrier, which rank 0
            // enters late.
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                // SAFETY: kill(2) on our own pid.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            });
        }
    }
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    world.barrier();
    world.barrier();
    println!("rank {me}: survived");
}

/// `die` with HWBARR_DIE=kill|abort: after `after` barriers of every kind,
/// every rank but one (HWBARR_DIE_RANK, default the last) waits in the
/// kind HWBARR_DIE_WAIT names (`barrier`, `ibarrier`: MPI_Wait on an
/// MPI_Ibarrier, `persistent`: MPI_Wait on a started persistent barrier);
/// the dying rank lets them settle (300 ms: long enough to be asleep on
/// the futex when waiting sleeps), writes the time of its death (ns since
/// the epoch) and the /dev/shm files it maps to HWBARR_DIE_STAMP, and
/// SIGKILLs itself or calls MPI_Abort.
fn die_while_others_wait(world: &SimpleCommunicator, after: u64, how: &str) {
    let me = world.rank();
    let victim = std::env::var("HWBARR_DIE_RANK").ok().and_then(|s| s.parse().ok()).unwrap_or(world.size() - 1);
    let wait = std::env::var("HWBARR_DIE_WAIT").unwrap_or_else(|_| "barrier".into());
    let mut p = Raw::persistent(world);
    for _ in 0..after {
        world.barrier();
        Raw::ibarrier(world).wait();
        p.start();
        p.wait();
    }
    if me != victim {
        match wait.as_str() {
            "barrier" => world.barrier(),
            "ibarrier" => Raw::ibarrier(world).wait(),
            "persistent" => {
                p.start();
                p.wait();
            }
            other => panic!("unknown HWBARR_DIE_WAIT {other}"),
        }
        println!("rank {me}: survived");
        return;
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut shm: Vec<&str> =
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|f| f.starts_with("/dev/shm/")).collect();
    shm.sort();
    shm.dedup();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    if let Ok(path) = std::env::var("HWBARR_DIE_STAMP") {
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, format!("{now}\n{}\n", shm.join("\n"))).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    if how == "abort" {
        use mpi::raw::AsRaw;
        // SAFETY: MPI_Abort on a live communicator; it does not return.
        unsafe { mpi::ffi::MPI_Abort(world.as_raw(), 7) };
    }
    // SAFETY: kill(2) on our own pid.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
}
