//! Barrier semantics on one node: every algorithm and size, progress, parameters, segments and
//! their release, MPI_Ibarrier and the persistent barrier, intercommunicators.

mod common;
use common::*;

#[test]
fn ompi_info_lists_component_and_parameters() {
    let out = Command::new("ompi_info")
        .args(["--param", "coll", "hwbarr", "--level", "9"])
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("MCA coll: hwbarr"), "{text}");
    for p in [
        "priority",
        "algorithm",
        "verbose",
        "spin",
        "idle",
        "inter",
        "topology",
        "stall_notice",
        "line_candidates",
        "line_poll_gap",
        "kept_segments",
    ] {
        assert!(text.contains(&format!("\"coll_hwbarr_{p}\"")), "missing {p}: {text}");
    }
    assert!(text.contains("current value: \"40\""), "priority default 40: {text}");
    // Choice parameters are MCA enums: ompi_info lists their values.
    for names in [
        &["auto", "toggle", "counter", "linear", "line", "polled"][..],
        &["auto", "spin", "yield", "sleep"],
        &["auto", "counter", "dissemination"],
    ] {
        let list: Vec<String> = names.iter().enumerate().map(|(i, n)| rte::enum_value(i, n)).collect();
        let valid = format!("Valid values: {}", list.join(", "));
        assert!(text.contains(&valid), "{valid}: {text}");
    }
    assert!(text.contains("performance \"coll_hwbarr_barriers\""), "the MPI_T pvar: {text}");
}

/// Barrier semantics with random delays on world, dup, split, overlapping
/// and short-lived communicators, for every algorithm and size, and proof
/// (verbose counts) that hwbarr itself served MPI_COMM_WORLD's barriers.
#[test]
fn semantics_every_algorithm_every_size() {
    for np in [1, 2, 3, 4, 8] {
        for alg in ["toggle", "counter", "linear", "line", "polled", "auto"] {
            let iters = if np == 8 { 600 } else { 1500 };
            let job = semantics(np, alg, iters, &[]);
            assert!(job.ok(), "np={np} alg={alg}\n{}", job.dump());
            let (out, err) = (job.stdout(), job.stderr());
            assert_eq!(out.matches("semantics OK").count(), np, "np={np} alg={alg}\n{}", job.dump());
            if np == 1 {
                assert!(!err.contains("served"), "hwbarr must decline a 1-rank world\n{}", job.dump());
                continue;
            }
            for r in 0..np {
                let line = format!("rank {r} of communicator cid 0: served {iters} barriers with ");
                let hit = err.lines().find(|l| l.contains(&line));
                let hit = hit.unwrap_or_else(|| panic!("np={np} alg={alg}: no '{line}'\n{}", job.dump()));
                if alg != "auto" {
                    assert!(hit.ends_with(alg), "{hit}");
                }
            }
            if alg != "auto" {
                let want =
                    format!("communicator 'MPI_COMM_WORLD' (cid 0, {np} ranks, one node): barriers served by {alg}");
                assert!(err.contains(&want), "{}", job.dump());
            }
        }
    }
}

/// Many-core machines this one is not: on a synthetic machine given to
/// hwbarr (`coll_hwbarr_topology`, node-local rank i on core i), 16 and 32
/// ranks (oversubscribed) keep barrier semantics on every communicator,
/// and MPI_COMM_WORLD's trees follow the machine (their verbose line): the
/// toggle barrier has one bank per L3 domain (or NUMA node's part of one)
/// and one per package, the polled barrier one group per domain read by
/// rank 0, and `flat` has
/// one bank or group for all. A value that is not a machine is named with
/// the valid ones, and the job runs on without hwbarr.
#[test]
fn trees_follow_a_synthetic_machine() {
    for (alg, np, machine, tree) in [
        ("toggle", 16, "package:2 l3:4 core:2", "toggle banks per level 8/2/1"),
        ("toggle", 32, "package:2 l3:2 core:4", "toggle banks per level 4/2/1"),
        ("toggle", 32, "flat", "toggle banks per level 1"),
        ("polled", 16, "package:2 l3:4 core:2", "polled groups per level 8/1"),
        ("polled", 32, "package:2 l3:2 core:4", "polled groups per level 4/1"),
        ("polled", 32, "flat", "polled groups per level 2/1"),
        // NUMA nodes split a package's L3 (sub-NUMA clustering): a domain each.
        ("toggle", 16, "package:2 numa:2 core:4", "toggle banks per level 4/2/1"),
        ("polled", 16, "package:2 numa:2 core:4", "polled groups per level 4/1"),
        // 17 L3 domains: more leaders than a group holds, so by package.
        ("polled", 34, "package:2 l3:10 core:2", "polled groups per level 17/2/1"),
    ] {
        let env = [("OMPI_MCA_coll_hwbarr_topology", machine)];
        let job = semantics(np, alg, 60, &env);
        assert!(job.ok(), "{alg} np={np} {machine}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), np, "{}", job.dump());
        let want = format!("communicator 'MPI_COMM_WORLD' (cid 0, {np} ranks, one node): barriers served by {alg}");
        let line = job.stderr().lines().find(|l| l.contains(&want)).map(str::to_string);
        let line = line.unwrap_or_else(|| panic!("{alg} np={np} {machine}: no '{want}'\n{}", job.dump()));
        assert!(line.contains(&format!("{tree})")), "{alg} np={np} {machine}: {line}");
    }
    let job = semantics(2, "toggle", 20, &[("OMPI_MCA_coll_hwbarr_topology", "package:2 gpu:3")]);
    assert!(job.ok(), "{}", job.dump());
    let err = job.stderr();
    assert!(err.contains("invalid value 'package:2 gpu:3' for MCA parameter coll_hwbarr_topology"), "{err}");
    assert!(!err.contains("served by toggle"), "hwbarr steps aside: {err}");
}

/// Many-core machines given to Open MPI itself: an hwloc XML file
/// (tests/hwloc_machine.c) as Open MPI's topology, ranks mapped and bound by
/// core (a binding to a core this machine lacks fails, and the rank runs
/// unbound with its place in the file), 16 and 32 ranks on this machine's
/// cores. Under `coll_hwbarr_topology auto` each rank takes its place from
/// the binding Open MPI reports, and MPI_COMM_WORLD's trees follow the
/// file's machine as they follow the same machine given to hwbarr: a domain
/// per L3, or per NUMA node's part of an L3 that spans two. Unbound, Open
/// MPI reports no binding: the ranks of the oversubscribed node have no
/// place, and the toggle barrier one bank for all. Bound by package, its
/// report names 4 L3s, which places no rank: each takes its place from its
/// own binding (this machine's one L3), and says why.
#[test]
fn trees_follow_a_machine_given_to_open_mpi() {
    let bound = rte::by_core();
    let unbound = rte::oversubscribe();
    let wide = rte::by_package();
    for (alg, np, machine, placement, tree) in [
        ("toggle", 16, "pack:2 l3:4 core:2 pu:1", bound, "toggle banks per level 8/2/1"),
        ("toggle", 32, "pack:2 l3:1 numa:2 core:8 pu:1", bound, "toggle banks per level 4/2/1"),
        ("polled", 32, "pack:2 l3:2 core:8 pu:1", bound, "polled groups per level 4/1"),
        // Open MPI reports no binding for a rank it did not bind.
        ("toggle", 16, "pack:2 l3:4 core:2 pu:1", unbound, "toggle banks per level 1)"),
        ("toggle", 16, "pack:2 l3:4 core:2 pu:1", wide, "toggle banks per level 1)"),
    ] {
        let xml = hwloc_machine_xml(machine);
        let b = board();
        let np_s = np.to_string();
        let rte = [(rte::topology_file_param(), xml.to_str().unwrap())];
        let mca = [("coll_hwbarr_algorithm", alg), ("coll_hwbarr_verbose", "3")];
        let cmd = mpirun_placed(placement, &["-np", &np_s], &rte, &mca, 180);
        let job = run(program(cmd, &[], &["semantics", "60"], &[("HWBARR_BOARD", b.to_str().unwrap())]), 180);
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        let _ = std::fs::remove_dir_all(xml.parent().unwrap());
        let case = format!("{alg} np={np} '{machine}' {placement:?}");
        assert!(job.ok(), "{case}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), np, "{case}\n{}", job.dump());
        let err = job.stderr();
        let want = format!("communicator 'MPI_COMM_WORLD' (cid 0, {np} ranks, one node): barriers served by {alg}");
        let line = err.lines().find(|l| l.contains(&want));
        let line = line.unwrap_or_else(|| panic!("{case}: no '{want}'\n{}", job.dump()));
        assert!(line.contains(tree), "{case}: want '{tree}': {line}");
        let from_open_mpi = err.lines().filter(|l| l.contains("(from the binding Open MPI reports, SK")).count();
        assert_eq!(from_open_mpi, if placement == bound { np } else { 0 }, "{case}\n{err}");
        let too_wide = err.lines().filter(|l| l.contains("names no one L3 domain)")).count();
        assert_eq!(too_wide, if placement == wide { np } else { 0 }, "{case}\n{err}");
    }
}

/// `auto` follows the node's size and its cores: with a core per rank
/// (forced here with `coll_hwbarr_idle spin`, on this machine's 2 cores)
/// the polled barrier above 2 ranks; with ranks sharing cores (the
/// automatic policy) the line barrier up to 8 ranks, the toggle above.
#[test]
fn auto_follows_the_node_size_and_its_cores() {
    for (np, idle, want) in [(4, "spin", "polled"), (4, "auto", "line"), (10, "spin", "polled"), (10, "auto", "toggle")]
    {
        let job = semantics(np, "auto", 30, &[("OMPI_MCA_coll_hwbarr_idle", idle)]);
        assert!(job.ok(), "np {np} idle {idle}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), np, "{}", job.dump());
        let line = format!("(cid 0, {np} ranks, one node): barriers served by {want} (auto: {np} ranks");
        assert!(job.stderr().contains(&line), "np {np} idle {idle}: no '{line}'\n{}", job.dump());
    }
}

/// The line barrier tries its candidate lines over the communicator's
/// first barriers where the ranks keep their cores (rank 0's verbose line at
/// setup says so) and then runs on the one it picked (rank 0's verbose line
/// names it and what the trial measured), the barrier's semantics checked
/// throughout; no trial with `coll_hwbarr_line_candidates 1`, nor where
/// ranks give their cores up or outnumber them, even told to spin; a
/// communicator freed before the trial's end says nothing of its end.
#[test]
fn the_line_barrier_runs_on_the_line_its_trial_picked() {
    let (two, more) = (cores() >= 2, cores() + 1);
    let (idle, spin) = ("OMPI_MCA_coll_hwbarr_idle", "spin");
    let lines = |n: u32| 2 + 3 * n * 64;
    for (np, iters, env, trial) in [
        (2, lines(4) + 2, &[][..], two),
        (2, lines(4) + 1, &[][..], two),
        (2, 300, &[("OMPI_MCA_coll_hwbarr_line_candidates", "1")][..], false),
        (2, lines(16) + 2, &[("OMPI_MCA_coll_hwbarr_line_candidates", "16")][..], two),
        (2, 300, &[(idle, "yield")][..], false),
        (more, 300, &[][..], false),
        (more, 300, &[(idle, spin)][..], false),
    ] {
        let job = semantics(np, "line", iters, env);
        assert!(job.ok(), "np {np} {env:?}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), np, "{}", job.dump());
        let err = job.stderr();
        let world = err.lines().find(|l| l.contains("'MPI_COMM_WORLD' (cid 0,")).expect("rank 0's verbose line");
        let of: u32 = env.iter().find(|e| e.0.ends_with("line_candidates")).map_or(4, |e| e.1.parse().unwrap());
        let trying = format!(", trying {of} candidate lines over {} barriers after this one)", lines(of));
        assert_eq!(world.contains(&trying), trial, "np {np} {env:?}: {world}\n{}", job.dump());
        // The first of the program's barriers meets in the exchange; the
        // trial ends at the arrival after its last.
        let over = trial && iters >= lines(of) + 2;
        let picked =
            format!(" of {of} candidates, fastest in their trial over {} barriers after its first: ", lines(of));
        let end = err.lines().find(|l| l.contains("'MPI_COMM_WORLD' (cid 0): the line barrier runs on line "));
        assert_eq!(end.is_some_and(|l| l.contains(&picked)), over, "np {np} {env:?}: {end:?}\n{}", job.dump());
    }
}

/// MPI_Barrier's line path looks `coll_hwbarr_line_poll_gap` ns apart, in
/// PAUSEs timed by each process (rank 0's verbose line says how many): one
/// with 0, at most 64 with a gap longer than 64 PAUSEs take, at least one by
/// default; the barrier's semantics checked each time. Needs 2 cores (the
/// path is for ranks that keep theirs).
#[test]
fn the_line_path_looks_as_far_apart_as_asked() {
    if cores() < 2 {
        eprintln!("skipped: one core, where 2 ranks give it up and take no line path");
        return;
    }
    for gap in [None, Some("0"), Some("-5"), Some("100000")] {
        let env: Vec<(&str, &str)> = gap.iter().map(|g| ("OMPI_MCA_coll_hwbarr_line_poll_gap", *g)).collect();
        let job = semantics(2, "line", 200, &env);
        assert!(job.ok(), "gap {gap:?}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), 2, "{}", job.dump());
        let err = job.stderr();
        let said = err
            .lines()
            .find(|l| l.contains("'MPI_COMM_WORLD' (cid 0): MPI_Barrier's line path looks up to 16 times, with "))
            .unwrap_or_else(|| panic!("gap {gap:?}: no line path line\n{}", job.dump()));
        let pauses: u32 = word_after(said, "with ").unwrap_or_else(|| panic!("{said}"));
        match gap {
            // The default gap in PAUSEs of the ns the line reports (to 0.1
            // ns: either neighbour's count where that rounding decides).
            None => {
                let ns: f64 = word_after(said, " PAUSE instructions (").unwrap_or_else(|| panic!("no ns: {said}"));
                let per_poll = |ns| mca_coll_hwbarr::pause::per_poll(ns, mca_coll_hwbarr::pause::LINE_POLL_GAP_NS);
                assert!([per_poll(ns - 0.05), per_poll(ns), per_poll(ns + 0.05)].contains(&pauses), "{said}");
            }
            Some("0" | "-5") => assert_eq!(pauses, 1, "{said}"),
            _ => assert_eq!(pauses, 64, "{said}"),
        }
    }
}

/// The word after the first `marker` in `line`, parsed.
fn word_after<T: std::str::FromStr>(line: &str, marker: &str) -> Option<T> {
    line.split(marker).nth(1)?.split(' ').next()?.parse().ok()
}

/// Under MPI_THREAD_MULTIPLE (one thread making every call, as mpi4py's
/// default level does) the line path is set up for a thread that finds no
/// other of its process waiting (rank 0's verbose line says so), and the
/// barrier's semantics hold. Needs 2 cores.
#[test]
fn the_line_path_serves_one_thread_of_a_thread_multiple_rank() {
    if cores() < 2 {
        eprintln!("skipped: one core, where 2 ranks give it up and take no line path");
        return;
    }
    let job = semantics(2, "line", 300, &[("HWBARR_THREAD_MULTIPLE", "1")]);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("semantics OK").count(), 2, "{}", job.dump());
    let said = "'MPI_COMM_WORLD' (cid 0): MPI_Barrier's line path looks up to 16 times";
    let line = job.stderr().lines().find(|l| l.contains(said)).map(str::to_owned);
    let line = line.unwrap_or_else(|| panic!("no line path line\n{}", job.dump()));
    assert!(line.ends_with("for a thread that finds no other of its process waiting"), "{line}");
    // And it served MPI_COMM_WORLD's barriers: each rank's served line
    // counts those the path took.
    for r in 0..2 {
        let served = format!("rank {r} of communicator cid 0: served ");
        let line = job.stderr().lines().find(|l| l.contains(&served)).map(str::to_owned);
        let line = line.unwrap_or_else(|| panic!("no served line of rank {r}\n{}", job.dump()));
        let lone: u64 =
            word_after(&line, " (").unwrap_or_else(|| panic!("rank {r}: no barrier by the lone thread's path: {line}"));
        assert!(lone > 100, "rank {r}: {line}");
    }
}

/// Ranks confined to fewer CPUs than they are, which the count of cores
/// online cannot see (here: the job started under one CPU, as `taskset -c
/// <cpu>` would): the automatic policy spins at first, finds from its long
/// waits' yields that its core is shared (`contention`), says so, and gives
/// the core up; barriers stay correct. `idle spin` set by the user is kept
/// (no finding). Needs 2 cores (on one, 2 ranks outnumber the cores and
/// share them by count); a launcher that tells the ranks from the start
/// that they share the core (`mpi_yield_when_idle`: the policy does not
/// spin) needs no finding, and the test then checks the barriers only.
#[test]
fn ranks_confined_to_one_cpu_find_their_core_shared() {
    const FOUND: &str = "this process's waits hand its core to other tasks";
    if cores() < 2 {
        eprintln!("skipped: one core, where 2 ranks share it by count");
        return;
    }
    let confined = |mode: &'static str, iters: u32, env: &[(&str, &str)]| {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        std::thread::spawn(move || {
            // The launcher and the ranks inherit this thread's mask: the
            // first CPU it may run on.
            use mca_coll_hwbarr::shm::sched;
            let pinned = sched::affinity().and_then(|set| sched::cpus(&set).next()).is_some_and(sched::pin_to);
            if !pinned {
                return None;
            }
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Some(board_job_env(2, "line", mode, iters, &env))
        })
        .join()
        .unwrap()
    };
    let Some(job) = confined("semantics", 3000, &[]) else {
        eprintln!("skipped: this thread cannot be pinned to one CPU");
        return;
    };
    let spins = |job: &Job| {
        assert!(job.ok(), "{}", job.dump());
        let err = job.stderr();
        let first = err.lines().find(|l| l.contains("barriers served by")).expect("rank 0's verbose line");
        let spins = first.contains("waiting by Spin");
        if !spins {
            eprintln!("the launcher told the ranks they share the core: no finding needed ({first})");
        }
        spins
    };
    assert_eq!(job.stdout().matches("semantics OK").count(), 2, "{}", job.dump());
    if spins(&job) {
        assert!(job.stderr().contains(FOUND), "{}", job.dump());
    }
    // Persistent barriers only, waited for in MPI_Wait and MPI_Test loops:
    // hwbarr's progress passes make the finding and give the core up; with
    // `idle yield` they give it up from the start, and make no finding.
    let yielded = |job: &Job| {
        (0..2).all(|r| {
            let head = format!("world rank {r}: progress passes gave the core up ");
            job.stderr().lines().any(|l| l.split_once(&head).is_some_and(|(_, n)| !n.starts_with('0')))
        })
    };
    let job = confined("persistent", 400, &[("HWBARR_PERSISTENT_ONLY", "1")]).expect("pinned before");
    assert_eq!(job.stdout().matches("persistent OK").count(), 2, "{}", job.dump());
    if spins(&job) {
        assert!(job.stderr().contains(FOUND) && yielded(&job), "{}", job.dump());
    }
    let job = confined("persistent", 400, &[("HWBARR_PERSISTENT_ONLY", "1"), ("OMPI_MCA_coll_hwbarr_idle", "yield")])
        .expect("pinned before");
    assert_eq!(job.stdout().matches("persistent OK").count(), 2, "{}", job.dump());
    assert!(yielded(&job) && !job.stderr().contains(FOUND), "{}", job.dump());

    let job = confined("semantics", 3000, &[("OMPI_MCA_coll_hwbarr_idle", "spin")]).expect("pinned before");
    assert!(job.ok(), "{}", job.dump());
    assert!(!job.stderr().contains(FOUND), "{}", job.dump());
}

/// Ranks that start their barriers on one CPU while their affinity allows
/// others (an unbound launch sometimes places 2 ranks so, and a rank that
/// yields to its peer there keeps looking cache-hot to the idle CPU's
/// balancer): their waits find the CPU shared, and one of them moves its
/// thread to another CPU (`contention::step_aside`) and says so, with
/// barriers correct throughout. Needs 2 CPUs; a launcher that
/// tells the ranks they share the core (the policy does not spin) makes no
/// finding, and the test then checks the barriers only.
#[test]
fn ranks_crowded_on_one_cpu_move_apart() {
    const MOVED: &str = "moved a waiting thread to another CPU";
    if cores() < 2 {
        eprintln!("skipped: one core");
        return;
    }
    let job = board_job_env(2, "line", "crowd", 20_000, &[]);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("crowd OK").count(), 2, "{}", job.dump());
    if job.stdout().contains("fewer than 2 CPUs allowed") {
        eprintln!("skipped: the ranks may run on one CPU only\n{}", job.dump());
        return;
    }
    let first = job.stderr().lines().find(|l| l.contains("barriers served by")).map(str::to_owned);
    if !first.is_some_and(|l| l.contains("waiting by Spin")) {
        eprintln!("the launcher told the ranks they share the core: no finding needed");
        return;
    }
    assert!(job.stderr().contains(MOVED), "{}", job.dump());
    // Where they end is the scheduler's (it may bring them together again
    // on a busy machine): said, not checked.
    let out = job.stdout();
    let ends: Vec<&str> = out.lines().filter(|l| l.contains("crowd from ")).collect();
    eprintln!("{}", ends.join("; "));
}

/// `coll_hwbarr_topology auto` at verbosity 3: each rank says once where
/// it sits in the node's caches and how that was found; on a machine whose
/// sysfs names L3 caches, 2 unbound ranks are placed from their binding
/// (the CPUs they may run on, one L3 on this machine) and sysfs; bound
/// to a core each by Open MPI, from the binding Open MPI reports, unless
/// the rank was rebound after launch (here by `taskset -c 0` in the
/// command): then from its own binding, naming the report it set aside,
/// and the two ranks, placed in two numberings, share no bank.
#[test]
fn auto_placement_is_reported_once_per_rank() {
    let has_l3 = (0..4).any(|i| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu0/cache/index{i}/level"))
            .is_ok_and(|l| l.trim() == "3")
    });
    let (unbound, _) = place_lines(rte::oversubscribe(), &[]);
    let (bound, bound_tree) = place_lines(rte::by_core(), &[]);
    let (rebound, rebound_tree) = place_lines(rte::by_core(), &["taskset", "-c", "0"]);
    if !has_l3 {
        return;
    }
    for line in unbound {
        assert!(line.ends_with(", by the kernel's ids (from its binding)"), "{line}");
    }
    for line in bound {
        assert!(line.contains(", by Open MPI's logical indices (from the binding Open MPI reports, SK0:L3"), "{line}");
    }
    assert!(
        rebound[0].contains(", by Open MPI's logical indices (from the binding Open MPI reports, SK0:L3"),
        "CPU 0 as reported: {}",
        rebound[0]
    );
    assert!(rebound[1].contains(", by the kernel's ids (from its binding; Open MPI's report SK0:L3"), "{}", rebound[1]);
    assert!(rebound[1].ends_with("(CPUs 1) is not its binding)"), "rebound to CPU 0: {}", rebound[1]);
    // One L3 here: placed alike, one bank; in two numberings, a bank each,
    // a bank per package above them and the root.
    assert!(bound_tree.contains("toggle banks per level 1)"), "{bound_tree}");
    assert!(rebound_tree.contains("toggle banks per level 2/2/1)"), "{rebound_tree}");
}

/// Each of 2 ranks' one verbose line on its place in the node's caches,
/// from a toggle job placed by `placement` and started through `wrapper`,
/// and the line that names MPI_COMM_WORLD's toggle tree.
fn place_lines(placement: &[&str], wrapper: &[&str]) -> (Vec<String>, String) {
    let b = board();
    let env = [("HWBARR_BOARD", b.to_str().unwrap())];
    let mca = [("coll_hwbarr_algorithm", "toggle"), ("coll_hwbarr_verbose", "3")];
    let cmd = mpirun_placed(placement, &["-np", "2"], &[], &mca, 120);
    let job = run(program(cmd, wrapper, &["semantics", "20"], &env), 120);
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok(), "{placement:?} {wrapper:?}\n{}", job.dump());
    let err = job.stderr();
    let line = |r: usize| {
        let tag = format!("world rank {r}: place in the node's caches: ");
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(&tag)).collect();
        assert_eq!(lines.len(), 1, "rank {r}\n{}", job.dump());
        lines[0].to_string()
    };
    let want = "communicator 'MPI_COMM_WORLD' (cid 0, 2 ranks, one node): barriers served by toggle";
    let tree = err.lines().find(|l| l.contains(want)).unwrap_or_else(|| panic!("no '{want}'\n{}", job.dump()));
    ((0..2).map(line).collect(), tree.to_string())
}

/// The checker above can fail: with the barrier left out it must report a
/// violation.
#[test]
fn semantics_check_catches_a_missing_barrier() {
    let job = semantics(3, "toggle", 200, &[("HWBARR_SKIP_BARRIER", "1")]);
    assert!(!job.ok() && job.stderr().contains("VIOLATION"), "{}", job.dump());
}

/// A rank waiting in the barrier turns MPI progress, so its peer's pending
/// rendezvous receive completes. TCP makes the sender's progress necessary.
#[test]
fn waiting_turns_mpi_progress() {
    for np in [2, 3] {
        for alg in ["toggle", "counter", "linear", "line", "polled"] {
            let job = mpirun(np, &[("coll_hwbarr_algorithm", alg), ("btl", "self,tcp")], &[], &["progress", "6"], 90);
            assert!(job.ok(), "np={np} alg={alg}: deadlock or failure\n{}", job.dump());
            assert_eq!(job.stdout().matches("progress OK").count(), np);
        }
    }
}

/// The waiting policy follows `mpi_yield_when_idle` on MPI_COMM_WORLD too,
/// although MPI_Init applies it to the progress engine only after
/// MPI_COMM_WORLD chose its collectives; `spin` and `idle` override it.
#[test]
fn waiting_policy_follows_yield_when_idle() {
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[], "waiting by Spin, 256 polls per progress turn"),
        (&[("mpi_yield_when_idle", "1")], "waiting by Yield, 1 polls per progress turn"),
        (
            &[("mpi_yield_when_idle", "1"), ("coll_hwbarr_idle", "spin"), ("coll_hwbarr_spin", "64")],
            "waiting by Spin, 64 polls per progress turn",
        ),
    ];
    for (extra, want) in cases {
        let mut mca = vec![("coll_hwbarr_algorithm", "counter"), ("coll_hwbarr_verbose", "1")];
        mca.extend_from_slice(extra);
        let job = mpirun(2, &mca, &[], &["progress", "1"], 60);
        assert!(job.ok(), "{extra:?}\n{}", job.dump());
        let line = job.stderr().lines().find(|l| l.contains("'MPI_COMM_WORLD'")).map(str::to_string);
        assert!(
            line.as_deref().is_some_and(|l| l.contains(want)),
            "{extra:?}: want '{want}' in MPI_COMM_WORLD's line, got {line:?}\n{}",
            job.dump()
        );
    }
}

/// The progress test can fail: a barrier that never turns progress
/// deadlocks and is stopped by the timeout.
#[test]
fn progress_test_catches_a_barrier_without_progress() {
    let job = mpirun(
        2,
        &[("coll_hwbarr_algorithm", "toggle"), ("coll_hwbarr_spin", "0"), ("btl", "self,tcp")],
        &[],
        &["progress", "6"],
        15,
    );
    assert!(job.timed_out(), "expected a deadlock\n{}", job.dump());
}

/// An invalid value of any choice parameter is refused by Open MPI itself
/// (an MCA enum: its message names the parameter, the value and the valid
/// values); hwbarr says once that it is out, serves nothing, and the job
/// runs on with correct barriers.
#[test]
fn invalid_values_are_refused_and_the_job_runs_on() {
    for (param, names) in [
        ("algorithm", &["auto", "toggle", "counter", "linear", "line", "polled"][..]),
        ("idle", &["auto", "spin", "yield", "sleep"]),
        ("inter", &["auto", "counter", "dissemination"]),
    ] {
        let b = board();
        let name = format!("coll_hwbarr_{param}");
        let job = mpirun(
            4,
            &[(&name, "bogus"), ("coll_hwbarr_verbose", "2")],
            &[("HWBARR_BOARD", b.to_str().unwrap())],
            &["semantics", "50"],
            120,
        );
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        assert!(job.ok(), "{param}\n{}", job.dump());
        assert_eq!(job.stdout().matches("semantics OK").count(), 4, "{}", job.dump());
        let err = job.stderr();
        assert_eq!(err.matches("is disabled for this").count(), 1, "hwbarr says it once: {}", job.dump());
        assert!(!err.contains("served"), "hwbarr must not serve: {}", job.dump());
        // Open MPI's own refusal. Its 4.1.4 runtime sometimes loses help
        // messages that several processes send at once (README, Limits):
        // then only its "ORTE_ERROR_LOG ... show_help.c" lines remain.
        let refused = err.lines().any(|l| l.contains("Variable") && l.trim_end().ends_with(&name));
        if refused {
            let list: Vec<String> = names.iter().enumerate().map(|(i, n)| rte::enum_value(i, n)).collect();
            assert!(err.contains(&list.join(", ")), "valid values listed: {}", job.dump());
        } else {
            assert!(ompi_major() == 4 && err.contains("show_help.c"), "{}", job.dump());
        }
    }
}

/// Hundreds of live communicators each get their own segment; freeing
/// them releases every segment and fd but the few a process keeps for its
/// next communicators (`coll_hwbarr_kept_segments`, 4 by default: segments
/// with their fds on rank 0, which creates them all, and mappings without
/// fds on rank 1), and a second round, which reuses them, leaves no more;
/// with 0 kept, every one.
#[test]
fn communicators_release_their_segments() {
    for (kept, env) in
        [(4, &[][..]), (2, &[("coll_hwbarr_kept_segments", "2")]), (0, &[("coll_hwbarr_kept_segments", "0")])]
    {
        let job = mpirun(2, env, &[], &["churn", "300"], 120);
        assert!(job.ok(), "{}", job.dump());
        let out = job.stdout();
        for (round, rank) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let head = format!("churn round {round} rank {rank}:");
            let line = out.lines().find(|l| l.starts_with(&head)).expect("churn line");
            let nums: Vec<usize> = line[head.len()..]
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            // base, live, after, fds before, fds after
            assert_eq!(&nums[0..3], &[1, 301, 1 + kept], "kept {kept}: {line}");
            let fds = if rank == 0 { kept } else { 0 };
            assert_eq!(nums[4], nums[3] + fds, "kept {kept}: fds leaked: {line}");
        }
    }
}

/// SIGKILL of a rank waiting inside a barrier: the job ends, and nothing of
/// hwbarr (nor of the job) stays in /dev/shm or the session directory.
#[test]
fn sigkill_in_a_barrier_leaves_nothing_behind() {
    let before = shm_names();
    let sess = scratch("session");
    let tmpdir = [(rte::tmpdir_param(), sess.to_str().unwrap())];
    let job = run(launch_rte_cmd(3, &[], &tmpdir, &[], &[], &["die", "50"], 60), 60);
    let left = files_under(&sess);
    let _ = std::fs::remove_dir_all(&sess);
    assert!(!job.ok() && !job.timed_out(), "{}", job.dump());
    assert!(job.stderr().contains("signal 9"), "{}", job.dump());
    let after = shm_names();
    assert!(after.iter().all(|n| !n.contains("hwbarr")), "{after:?}");
    assert_eq!(before, after, "/dev/shm changed");
    assert!(left.is_empty(), "left in the session dir: {left:?}");
}

/// Two jobs of the same user at once never share a segment.
#[test]
fn two_jobs_at_once() {
    let _g = lock();
    let boards = [board(), board()];
    let mut kids: Vec<_> = boards
        .iter()
        .map(|b| {
            mpirun_cmd(
                2,
                &[("coll_hwbarr_algorithm", "counter")],
                &[("HWBARR_BOARD", b.to_str().unwrap())],
                &["semantics", "1000"],
                180,
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for k in kids.drain(..) {
        let out = k.wait_with_output().unwrap();
        let job = Job { out, timed_out: false };
        assert!(job.ok() && job.stdout().matches("semantics OK").count() == 2, "{}", job.dump());
    }
    for b in boards {
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
    }
}

/// Intercommunicators are declined (and say so at verbose 3); their
/// barrier is served by another component and the job runs.
#[test]
fn intercommunicators_are_declined() {
    let job = mpirun(4, &[("coll_hwbarr_verbose", "3")], &[], &["intercomm", "20"], 60);
    assert!(job.ok() && job.stdout().matches("intercomm OK").count() == 4, "{}", job.dump());
    assert!(job.stderr().contains(": intercommunicator"), "{}", job.dump());
}

/// MPI_Ibarrier on several communicators completed in any order (Wait,
/// Test loops, Waitany, Waitall), ibarrier before a blocking barrier, two
/// outstanding on one communicator; every completion checked on the board.
#[test]
fn ibarrier_semantics() {
    for np in [2, 3, 4, 8] {
        for alg in ["toggle", "counter", "line", "polled"] {
            let iters = if np == 8 { 100 } else { 300 };
            let job = board_job(np, alg, "nonblocking", iters);
            assert!(job.ok(), "np={np} alg={alg}\n{}", job.dump());
            assert_eq!(job.stdout().matches("nonblocking OK").count(), np, "{}", job.dump());
            // Every iteration: 3 ibarriers over the 3 dups, and on one of
            // them 1 ibarrier + 1 barrier + 2 ibarriers: 7 per iteration,
            // all served by hwbarr (the dups are the first 3 communicators).
            let total: u64 = first_cids(&job.stderr(), 3).into_iter().flat_map(|c| served(&job.stderr(), c)).sum();
            assert_eq!(total, 7 * iters as u64 * np as u64, "{}", job.dump());
        }
    }
}

/// A non-blocking or persistent barrier that every rank entered completes
/// for the one rank that waits on it while the others make no MPI call
/// (`absent`), whichever rank that is: on the polled device the waiter
/// reads for its absent leaders (4 and 5 ranks: two L3 domains, a leader
/// between the leaves and rank 0).
#[test]
fn nonblocking_barriers_complete_while_the_others_compute() {
    for np in [2, 4, 5] {
        for alg in ["toggle", "counter", "line", "polled"] {
            let job = board_job(np, alg, "absent", 2 * np as u32);
            assert!(job.ok(), "np={np} alg={alg}\n{}", job.dump());
            assert!(!job.stderr().contains("ABSENT"), "np={np} alg={alg}\n{}", job.dump());
            assert_eq!(job.stdout().matches("absent OK").count(), np, "{}", job.dump());
        }
    }
}

/// The persistent barrier started thousands of times with random delays,
/// Wait and Test loops, inactive and freed requests, blocking barriers
/// in between.
#[test]
fn persistent_barrier_semantics() {
    for np in [2, 3, 4, 8] {
        for alg in ["toggle", "counter", "line", "polled"] {
            let iters = if np == 8 { 500 } else { 2000 };
            let job = board_job(np, alg, "persistent", iters);
            assert!(job.ok(), "np={np} alg={alg}\n{}", job.dump());
            assert_eq!(job.stdout().matches("persistent OK").count(), np, "{}", job.dump());
            let blocking = (iters as u64).div_ceil(100);
            let counts = served(&job.stderr(), 3);
            assert_eq!(counts, vec![iters as u64 + blocking; np], "{}", job.dump());
        }
    }
}

/// Each rank's report of its nonblocking starts' windows on the board's
/// communicator (cid 3): (looked, saw, did not look), in rank order.
fn start_windows(err: &str) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<(usize, (u64, u64, u64))> = err
        .lines()
        .filter_map(|l| {
            let (head, rest) = l.split_once(" of communicator cid 3: nonblocking starts looked for their release ")?;
            let n: Vec<u64> = rest.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            Some((head.rsplit(' ').next()?.parse().ok()?, (n[0], n[1], n[2])))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).collect()
}

/// Nonblocking starts look for their release before they leave it to
/// progress (`wait::StartWindow`), as each rank reports at verbosity 2:
/// 2 ranks on the line core in a tight loop of persistent starts see
/// releases there; with random delays (peers late) starts also skip their
/// look; 3 ranks on fewer cores look (a yield) on the counter too; 2 ranks
/// on the counter with a core each do not look (polls do not pay there).
#[test]
fn nonblocking_starts_look_briefly_before_progress() {
    let iters = 2000u64;
    let only = ("HWBARR_PERSISTENT_ONLY", "1");
    if cores() >= 2 {
        // A tight loop's windows see releases unless something else holds
        // the cores for the whole loop (seen once on a busy host, both ranks
        // finding their cores shared): up to 3 launches.
        let mut last = String::new();
        let seen = (0..3).any(|_| {
            let job = board_job_env(2, "line", "persistent", iters as u32, &[only, ("HWBARR_NO_DELAY", "1")]);
            assert!(job.ok() && job.stdout().matches("persistent OK").count() == 2, "{}", job.dump());
            let w = start_windows(&job.stderr());
            assert_eq!(w.len(), 2, "{}", job.dump());
            for &(looked, saw, skipped) in &w {
                assert!(saw <= looked && looked + skipped <= iters, "tight loop: {w:?}\n{}", job.dump());
            }
            last = format!("{w:?}\n{}", job.dump());
            w.iter().all(|&(_, saw, _)| saw > 0)
        });
        assert!(seen, "tight loop, no release seen in a window in 3 launches; the last: {last}");
        let job = board_job_env(2, "line", "persistent", iters as u32, &[only]);
        assert!(job.ok(), "{}", job.dump());
        let w = start_windows(&job.stderr());
        assert_eq!(w.len(), 2, "{}", job.dump());
        assert!(w.iter().all(|&(l, s, k)| l > 0 && s <= l && l + k <= iters), "delays: {w:?}\n{}", job.dump());
        assert!(w.iter().any(|&(_, _, k)| k > 0), "late peers make starts skip their look: {w:?}\n{}", job.dump());
        let job = board_job_env(2, "counter", "persistent", 200, &[only]);
        assert!(job.ok(), "{}", job.dump());
        assert_eq!(start_windows(&job.stderr()), vec![], "{}", job.dump());
    }
    let np = cores() + 1;
    let job = board_job_env(np, "counter", "persistent", 300, &[only]);
    assert!(job.ok(), "{}", job.dump());
    let w = start_windows(&job.stderr());
    assert_eq!(w.len(), np, "{}", job.dump());
    assert!(w.iter().all(|&(l, s, k)| l > 0 && s <= l && l + k <= 300), "shared cores: {w:?}\n{}", job.dump());
}

/// 100,000 non-blocking and persistent barriers: no segment, fd or memory
/// left behind.
#[test]
fn nonblocking_barriers_leak_nothing() {
    for alg in ["toggle", "counter", "line", "polled"] {
        let job =
            mpirun(3, &[("coll_hwbarr_algorithm", alg), ("coll_hwbarr_verbose", "2")], &[], &["leak", "100000"], 120);
        assert!(job.ok(), "{}", job.dump());
        let out = job.stdout();
        let line = out.lines().find(|l| l.starts_with("leak:")).expect("leak line");
        let nums: Vec<u64> =
            line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
        // ops, segs before/after, fds before/after, rss before/after (KiB)
        assert_eq!(nums[1], nums[2], "{line}");
        assert_eq!(nums[3], nums[4], "{line}");
        assert!(nums[6] <= nums[5] + 512, "resident memory grew: {line}");
        assert_eq!(served(&job.stderr(), 3), vec![102_000; 3], "{}", job.dump());
    }
}

/// Ranks of two jobs on one communicator (MPI_Comm_spawn, then
/// MPI_Intercomm_merge): as many ranks as cores spawn as many again, so
/// each job alone has a core per rank but the merged communicator has
/// twice as many ranks as cores. hwbarr serves it, every kind of barrier
/// keeps its semantics, and it waits as on an oversubscribed node (it
/// counts the communicator's ranks on the node, not only the job's): a
/// spinning policy there cost 180-290 µs per barrier against 5.6-16.
#[test]
fn spawned_ranks_merged_share_the_cores() {
    let cores = cores();
    let np = cores.min(8);
    let job = board_job(np, "auto", "spawn", 600);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("spawn OK (600 barriers").count(), 2 * np, "{}", job.dump());
    let merged = format!("{} ranks, one node): barriers served by", 2 * np);
    let line = job.stderr().lines().find(|l| l.contains(&merged)).map(str::to_owned);
    let line = line.unwrap_or_else(|| panic!("no verbose line for the merged communicator\n{}", job.dump()));
    if 2 * np > cores {
        assert!(line.contains("waiting by Sleep"), "ranks outnumber cores, yet: {line}\n{}", job.dump());
    }
    // Parents and children each served every barrier of the merged communicator.
    let served = job.stderr().matches("served 600 barriers").count();
    assert!(served >= 2 * np, "{served} ranks report 600 served barriers\n{}", job.dump());
}

/// Two jobs of separate mpiruns joined by MPI_Comm_accept/MPI_Comm_connect
/// (Open MPI 4.1's name server, `ompi-server`), each of as many ranks as
/// cores (at most 32: the board holds 64), merged: Open MPI takes the
/// other job's ranks for remote, so the communicator looks as if it spans
/// nodes; hwbarr's layout exchange finds one node, and the merged
/// communicator must wait as oversubscribed (the build before spun there:
/// 639-774 µs per barrier against 4.5-10.7). Every kind of barrier is
/// checked on the board both jobs map. 5.0 and 6.0 join separate launches
/// only inside one runtime (a DVM), where Open MPI knows the other job's
/// ranks are local: not run there.
#[test]
fn jobs_joined_by_connect_and_accept() {
    if !separate_launches_join() {
        return;
    }
    let cores = cores();
    let np = cores.min(32);
    let (accepting, connecting) = joined_jobs(np, &[], 300);
    assert!(accepting.ok(), "accepting job\n{}", accepting.dump());
    assert!(connecting.ok(), "connecting job\n{}", connecting.dump());
    let (out, err) = (accepting.stdout() + &connecting.stdout(), accepting.stderr() + &connecting.stderr());
    assert_eq!(out.matches("connect OK (600 barriers").count(), 2 * np, "{out}\n{err}");
    let merged = format!(" {} ranks on 1 nodes): node of rank 0: {} ranks,", 2 * np, 2 * np);
    let line = err.lines().find(|l| l.contains(&merged)).unwrap_or_else(|| panic!("no line '{merged}'\n{err}"));
    if 2 * np > cores {
        assert!(line.contains("waiting by Sleep"), "ranks outnumber cores, yet: {line}");
    }
    assert!(err.matches("served 600 barriers").count() >= 2 * np, "{err}");
}

/// The connecting job runs without hwbarr (`--mca coll ^hwbarr`), the
/// accepting one with it: their merged communicator's first barrier cannot
/// meet. Both jobs end at once instead of hanging, and a hwbarr rank names
/// a rank of the other job (as with ranks of one job that disagree).
#[test]
fn jobs_joined_by_connect_one_without_hwbarr_fail_fast() {
    if !separate_launches_join() {
        return;
    }
    let np = cores().min(32);
    let (accepting, connecting) = joined_jobs(np, &[("coll", "^hwbarr")], 120);
    for (who, job) in [("accepting", &accepting), ("connecting", &connecting)] {
        assert!(!job.ok() && !job.timed_out(), "{who} job must fail, not finish or hang\n{}", job.dump());
    }
    let named = "does not run hwbarr's barrier on this communicator";
    assert!(accepting.stderr().contains(named), "{}", accepting.dump());
}

/// Whether separate mpiruns can join here (Open MPI 4.1's `ompi-server`);
/// 5.0 and 6.0 join them only inside one DVM: the test says it is skipped.
fn separate_launches_join() -> bool {
    let v = ompi_major();
    if v >= 5 {
        eprintln!("skipped: Open MPI {v} joins separate launches only inside one DVM");
    }
    v < 5
}

/// Two jobs of `np` ranks each joined by accept and connect through an
/// `ompi-server`, running barrier_check's `accept` and `connect` (600
/// barriers) at verbosity 2, the connecting one with `connect_mca` too:
/// (accepting job, connecting job). Nothing of them stays behind.
fn joined_jobs(np: usize, connect_mca: &[(&str, &str)], secs: u32) -> (Job, Job) {
    let (dir, b) = (scratch("connect"), board());
    let (uri, ready) = (dir.join("uri"), dir.join("ready"));
    // Every process of the test keeps its session directory in `dir`.
    let tmpdir = dir.to_str().unwrap();
    let _g = lock();
    let mut server = Command::new("ompi-server");
    server.arg("--no-daemonize").arg("-r").arg(&uri).env("OMPI_MCA_orte_tmpdir_base", tmpdir);
    set_env(&mut server, &[]);
    let server = Stopped::spawn(&mut server);
    // The contact file is complete once its line is.
    let written = |f: &std::path::Path| std::fs::read_to_string(f).is_ok_and(|t| t.ends_with('\n'));
    assert!(waited(|| written(&uri)), "ompi-server wrote no contact file");
    let server_opt = format!("file:{}", uri.display());
    let launch = ["--ompi-server", server_opt.as_str()];
    let rte = [(rte::tmpdir_param(), tmpdir)];
    let env = [("HWBARR_BOARD", b.to_str().unwrap()), ("HWBARR_READY", ready.to_str().unwrap())];
    let mut mca = vec![("coll_hwbarr_verbose", "2")];
    let job = |mode: &str, mca: &[(&str, &str)]| launch_rte_cmd(np, &launch, &rte, mca, &env, &[mode, "600"], secs);
    // The accepting job writes to files: nothing reads a pipe while the
    // connecting job runs.
    let (a_out, a_err) = (dir.join("accept.out"), dir.join("accept.err"));
    let mut accept_cmd = job("accept", &mca);
    accept_cmd.stdout(std::fs::File::create(&a_out).unwrap()).stderr(std::fs::File::create(&a_err).unwrap());
    let accepting = Stopped::spawn(&mut accept_cmd);
    mca.extend_from_slice(connect_mca);
    let connecting = waited(|| written(&ready)).then(|| job("connect", &mca).output().expect("mpirun"));
    // A connecting job that failed may leave the other waiting (in
    // MPI_Comm_accept, or in a barrier the failed job never enters): given
    // 30 s to end by itself, then stopped; none at all: stopped at once.
    let grace = match &connecting {
        Some(o) if o.status.success() => secs,
        Some(_) => 30,
        None => 0,
    };
    let accepted = accepting.finish_within(grace);
    drop(server);
    let read = |f: &std::path::Path| std::fs::read(f).unwrap_or_default();
    let accepting = Job::of(std::process::Output { status: accepted, stdout: read(&a_out), stderr: read(&a_err) });
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    (accepting, Job::of(connecting.expect("the accepting job published its name")))
}

/// Polls `ok` every 0.1 s for up to 60 s.
fn waited(ok: impl Fn() -> bool) -> bool {
    for _ in 0..600 {
        if ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    ok()
}

/// A child process that is stopped (SIGTERM) and waited for however the
/// test ends, so that nothing of it stays behind.
struct Stopped(Option<std::process::Child>);

impl Stopped {
    fn spawn(c: &mut Command) -> Stopped {
        Stopped(Some(c.spawn().expect("spawn")))
    }

    /// Waits for it to end, for at most `secs` seconds before stopping it.
    fn finish_within(mut self, secs: u32) -> std::process::ExitStatus {
        Self::end(self.0.take().unwrap(), secs)
    }

    fn end(mut child: std::process::Child, secs: u32) -> std::process::ExitStatus {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs.into());
        while std::time::Instant::now() < until {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        child.wait().expect("wait")
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            Self::end(c, 0);
        }
    }
}

/// A direct launch (`srun`) sets none of mpirun's `OMPI_COMM_WORLD_*`
/// variables, and no `mpi_yield_when_idle` when it oversubscribes: the
/// job's ranks on the node then come from Open MPI's own count (PMIx), and
/// the rank that speaks for the job from `PMIX_RANK`. Simulated by starting
/// each rank through `env -u` with `mpi_yield_when_idle 0`: twice as many
/// ranks as cores, whose even/odd halves each fit the cores but share them
/// with the other half, so every communicator must wait as oversubscribed
/// (the build that read only mpirun's variable spun on the halves); and a
/// job-wide warning comes once, not from every rank.
#[test]
fn direct_launch_without_mpiruns_variables() {
    let cores = cores();
    let np = (2 * cores).clamp(4, 64);
    let wrapper = ["env", "-u", "OMPI_COMM_WORLD_LOCAL_SIZE", "-u", "OMPI_COMM_WORLD_RANK"];
    let b = board();
    let board_env = [("HWBARR_BOARD", b.to_str().unwrap())];
    let mca = [("coll_hwbarr_verbose", "2"), ("mpi_yield_when_idle", "0")];
    let job = mpirun_through(np, &wrapper, &mca, &board_env, &["semantics", "300"], 300);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("semantics OK").count(), np, "{}", job.dump());
    let err = job.stderr();
    let half = format!("{} ranks, one node): barriers served by", np / 2);
    assert!(err.lines().any(|l| l.contains(&half)), "no verbose line for a half\n{}", job.dump());
    if np > cores {
        for line in err.lines().filter(|l| l.contains("waiting by")) {
            assert!(line.contains("waiting by Sleep"), "ranks outnumber cores, yet: {line}\n{}", job.dump());
        }
    }
    let mca = [("coll_hwbarr_algorithm", "bogus")];
    let job = mpirun_through(4, &wrapper, &mca, &board_env, &["semantics", "50"], 120);
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stderr().matches("is disabled for this").count(), 1, "said once: {}", job.dump());
}

/// A singleton (a program started without mpirun): hwbarr declines its
/// 1-rank MPI_COMM_WORLD, and when it spawns a child (Open MPI then starts
/// its runtime on demand) serves the merged communicator of the two.
#[test]
fn singleton_declines_its_world_and_serves_what_it_spawns() {
    // (mode, ranks that report OK, ranks that hwbarr served)
    // A singleton has no launcher to remove its shared-memory transport's
    // file when it ends (Open MPI 5.0 and 6.0 leave it in /dev/shm, with
    // hwbarr or without): it goes in the test's scratch directory instead,
    // so that /dev/shm must come out as it was.
    let before = shm_names();
    for (mode, ranks, served) in [("semantics", 1, 0), ("spawn", 2, 2)] {
        let b = board();
        let scratch = b.parent().unwrap();
        let mut c = Command::new("timeout");
        c.args(["-k", "5", "120"]).arg(target_dir().join("examples/barrier_check")).args([mode, "200"]);
        c.env("OMPI_MCA_mca_base_component_path", component_path()).env("OMPI_MCA_coll_hwbarr_verbose", "2");
        c.env(format!("OMPI_MCA_{}", transport_dir_param()), scratch);
        set_env(&mut c, &[("HWBARR_BOARD", b.to_str().unwrap())]);
        let job = run(c, 120);
        let _ = std::fs::remove_dir_all(scratch);
        assert!(job.ok(), "{mode}\n{}", job.dump());
        assert_eq!(job.stdout().matches(" OK (200 barriers").count(), ranks, "{mode}\n{}", job.dump());
        assert_eq!(job.stderr().matches("served 200 barriers with").count(), served, "{mode}\n{}", job.dump());
    }
    assert_eq!(new_job_files_in_shm(&before), Vec::<String>::new(), "left in /dev/shm");
}

/// MPI Sessions (Open MPI 5.0 and later), no MPI_Init: communicators made
/// from the world process set's groups, one of them with a context id
/// that differs between ranks; hwbarr serves all three (blocking and
/// non-blocking barriers checked on the board) and the session finalizes.
#[test]
fn sessions_without_mpi_init() {
    if ompi_major() < 5 {
        eprintln!("skipped: Open MPI {} has no MPI Sessions", ompi_major());
        return;
    }
    let job = board_job(4, "auto", "sessions", 300);
    assert!(job.ok(), "{}", job.dump());
    assert_eq!(job.stdout().matches("sessions OK (300 barriers").count(), 4, "{}", job.dump());
    // Each of 4 ranks served 300 barriers on each of its 3 communicators.
    assert_eq!(job.stderr().matches("served 300 barriers with").count(), 12, "{}", job.dump());
}

/// Where ranks outnumber cores, a rank that waits long in a barrier (its
/// peer computes for a second) sleeps and leaves the core to others: its
/// thread uses a small part of the wait's CPU time, though a waiter yields
/// for 50 µs before it sleeps (`wait::YIELD_BEFORE_SLEEP`). With `idle
/// yield` the same waiters keep taking their turns on the cores, which the
/// check must see.
#[test]
fn a_long_wait_of_shared_cores_sleeps() {
    if cores() < 2 {
        return; // a yielding waiter and its busy peer on one core: no contrast to see
    }
    // `auto` sleeps where ranks outnumber cores; `sleep` and `yield` are
    // set, so 3 ranks show them on any machine.
    let cpu_share = |idle: &str, np: usize| -> Vec<f64> {
        let mca = [("coll_hwbarr_algorithm", "counter"), ("coll_hwbarr_idle", idle)];
        let job = mpirun(np, &mca, &[], &["idle", "1000"], 120);
        assert!(job.ok(), "{idle}\n{}", job.dump());
        assert_eq!(job.stdout().matches("idle OK").count(), np, "{}", job.dump());
        let share = |l: &str| {
            let (_, rest) = l.split_once(": waited ")?;
            let (waited, cpu) = rest.split_once(" us, cpu ")?;
            Some(cpu.trim_end_matches(" us").parse::<f64>().ok()? / waited.parse::<f64>().ok()?)
        };
        let shares: Vec<f64> = job.stdout().lines().filter_map(share).collect();
        assert_eq!(shares.len(), np - 1, "{}", job.dump());
        shares
    };
    for (idle, np) in [("auto", cores() + 1), ("sleep", 3)] {
        let shares = cpu_share(idle, np);
        assert!(shares.iter().all(|&s| s < 0.15), "{idle}: waiters' CPU per wall-clock time {shares:?}");
    }
    let shares = cpu_share("yield", 3);
    assert!(shares.iter().any(|&s| s > 0.2), "yield: waiters' CPU per wall-clock time {shares:?}");
}
