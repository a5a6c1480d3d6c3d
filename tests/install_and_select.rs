//! What users see when they install and select hwbarr: ompi_info, make install and module
//! files, include lists, builds for another release line, peers above and below hwbarr, MPI_T.

mod common;
use common::*;

/// `make install` targets the component directory of the Open MPI under
/// test (its own `ompi_info`'s pkglibdir) when it is writable, as for root
/// here, so that a 4.1 and a 5.0 build never land in one directory.
#[test]
fn make_install_targets_the_open_mpi_it_was_built_for() {
    let out = Command::new("make")
        .args(["--no-print-directory", "-s", "component-dir"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("make");
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let writable = Command::new("test").args(["-w", pkglib()]).status().map(|s| s.success()).unwrap_or(false);
    let home = std::env::var("HOME").unwrap_or_default();
    let want = if writable { pkglib().to_string() } else { format!("{home}/.openmpi/components") };
    assert_eq!(dir, want, "make component-dir (OMPI_PREFIX={:?})", std::env::var("OMPI_PREFIX").ok());
}

/// `make install PREFIX=<dir>` installs hwbarr into a prefix of its own
/// with a module file; loaded with Lmod in a fresh login shell, it makes
/// the Open MPI under test list hwbarr in `ompi_info` (Open MPI's own
/// components still there) and serve a job's barriers with it, and
/// unloading it leaves nothing set.
#[test]
fn module_file_makes_open_mpi_load_hwbarr() {
    let prefix = scratch("module-prefix");
    let out = Command::new("make")
        .args(["--no-print-directory", "-s", "install"])
        .arg(format!("PREFIX={}", prefix.display()))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("make");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "make install PREFIX: {said}");
    let name = said
        .split("module load ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("make install names the module: {said}"))
        .to_string();
    // A fresh login shell (Debian's Lmod defines `module` there) with
    // nothing of this process's environment.
    let path = std::env::var("PATH").unwrap_or_default();
    let bin = std::env::split_paths(&path).find(|d| d.join("ompi_info").is_file()).expect("ompi_info on PATH");
    let b = board();
    // The login shell's profile resets PATH: the Open MPI under test goes
    // on it in the script, as a site's own Open MPI module would put it.
    let script = format!(
        "export PATH={bin}:$PATH LD_LIBRARY_PATH={ld}\n\
         module use {prefix}/modulefiles && module load {name} || exit 9\n\
         ompi_info | grep 'MCA coll:'\n\
         timeout -k 5 60 mpirun {over} -np 2 --mca coll_hwbarr_verbose 2 {exe} semantics 20 || exit 8\n\
         module unload {name}\n\
         echo \"after unload: [${{OMPI_MCA_mca_base_component_path-}}]\"\n",
        prefix = prefix.display(),
        bin = bin.display(),
        ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
        over = rte::oversubscribe().join(" "),
        exe = target_dir().join("examples/barrier_check").display(),
    );
    let _g = lock();
    let out = Command::new("env")
        .arg("-i")
        .arg(format!("HOME={}", std::env::var("HOME").unwrap_or_default()))
        .arg("PATH=/usr/local/bin:/usr/bin:/bin")
        .args(["OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"])
        .arg(format!("HWBARR_BOARD={}", b.display()))
        .args(["bash", "-lc", &script])
        .output()
        .expect("bash");
    drop(_g);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let dump = format!("{script}\n--- status {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", out.status);
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    let _ = std::fs::remove_dir_all(&prefix);
    assert!(out.status.success(), "{dump}");
    assert!(stdout.contains("MCA coll: hwbarr") && stdout.contains("MCA coll: tuned"), "{dump}");
    assert_eq!(served(&stderr, 0), vec![20; 2], "hwbarr served MPI_COMM_WORLD: {dump}");
    assert!(stdout.contains("after unload: []"), "{dump}");
}

/// `--mca coll hwbarr` alone: Open MPI cannot start the job (nothing
/// serves the other collectives), and hwbarr says once what to write:
/// nothing, or a list of every coll component this Open MPI has (what
/// `ompi_info` lists), so that nothing the default selection would use is
/// lost (coll/inter for intercommunicators).
#[test]
fn sole_hwbarr_selection_says_what_to_write() {
    let job = mpirun(2, &[("coll", "hwbarr")], &[], &["semantics", "1"], 60);
    assert!(!job.ok() && !job.timed_out(), "{}", job.dump());
    let advice: Vec<_> =
        job.stderr().lines().filter(|l| l.contains("'--mca coll hwbarr' allows no other")).map(String::from).collect();
    assert_eq!(advice.len(), 1, "{}", job.dump());
    assert!(advice[0].contains("write nothing"), "{}", advice[0]);
    let list = advice[0].split("'--mca coll ").nth(2).and_then(|r| r.split('\'').next()).expect("a list").to_string();
    let mut names: Vec<String> = list.split(',').map(String::from).collect();
    assert_eq!(names[0], "hwbarr", "{list}");
    names.sort();
    assert_eq!(names, ompi_info_coll_components(), "the advice names every coll component: {list}");
    // With the list it names, the same job runs and hwbarr serves it.
    let b = board();
    let job = mpirun(
        2,
        &[("coll", &list), ("coll_hwbarr_verbose", "2")],
        &[("HWBARR_BOARD", b.to_str().unwrap())],
        &["semantics", "50"],
        60,
    );
    let _ = std::fs::remove_dir_all(b.parent().unwrap());
    assert!(job.ok() && !job.stderr().contains("allows no other"), "{}", job.dump());
    assert_eq!(served(&job.stderr(), 0), vec![50; 2], "{}", job.dump());
    // Intercommunicator collectives under that list and under the default
    // selection (coll/basic's intercommunicator scatter crashed under the
    // shorter list hwbarr used to recommend).
    for np in [3, 4, 5] {
        for mca in [vec![("coll", list.as_str())], vec![]] {
            let job = mpirun(np, &mca, &[], &["intercomm", "20"], 60);
            let ok = job.stdout().matches("intercomm OK").count();
            assert!(job.ok() && ok == np, "np {np}, {mca:?}: {}", job.dump());
        }
    }
}

/// A program that loads libmpi into a local scope (as Python's ctypes and
/// the mpi4py wheel do) still gets hwbarr: the component finds Open MPI's
/// symbols through its own dependency on the library the process runs
/// (build.rs), where without it dlopen fails on the first Open PAL symbol
/// and the job quietly runs on the stock barrier.
#[test]
fn a_program_holding_libmpi_in_a_local_scope_gets_hwbarr() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/local_libmpi.c");
    let exe = target_dir().join("local_libmpi");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc).args(["-O1", "-o"]).arg(&exe).arg(&src).arg("-ldl").status().expect("run cc");
    assert!(st.success(), "{cc} {src:?}");
    let libmpi = our_libdirs()
        .iter()
        .map(|d| d.join("libmpi.so"))
        .find(|p| p.exists())
        .expect("libmpi.so in mpicc --showme:libdirs");
    let mut c = Command::new("timeout");
    c.args(["-k", "5", "60", "mpirun"]).args(rte::oversubscribe()).args(["-np", "2"]);
    c.args(["--mca", "mca_base_component_path", component_path()]);
    c.args(["--mca", "coll_hwbarr_verbose", "2"]);
    c.arg(&exe).arg(&libmpi).arg("50");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let job = run(c, 60);
    assert!(job.ok() && job.stdout().matches("local-scope OK").count() == 2, "{}", job.dump());
    assert!(!job.stderr().contains("unable to open"), "dlopen of hwbarr failed: {}", job.dump());
    assert_eq!(served(&job.stderr(), 0), vec![50; 2], "hwbarr serves MPI_COMM_WORLD: {}", job.dump());
}

/// A component built for another release line (4.1, 5.0, 6.0), found on
/// the component path: the job runs on the stock barrier and the foreign
/// build serves nothing. When the library it depends on (libmpi.so.40 of
/// 4.1 and 5.0) is the one this Open MPI runs: no dlopen error per rank,
/// one line saying what it is. When it is not (6.0's libopen_mpi.so.0
/// against the others'): that line, or Open MPI's own dlopen message
/// naming the library. Checks every other line's build in this tree (CI
/// builds 4.1, then 5.0, then 6.0, so the later runs check the earlier
/// lines' builds).
#[test]
fn a_build_for_the_other_release_line_is_refused_in_one_line() {
    let ours = target_dir().join("libmca_coll_hwbarr.so").canonicalize().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let mut candidates = vec![root.join("release/libmca_coll_hwbarr.so")];
    if let Ok(rd) = std::fs::read_dir(&root) {
        candidates.extend(rd.flatten().map(|e| e.path().join("release/libmca_coll_hwbarr.so")));
    }
    let mut others: Vec<PathBuf> = candidates
        .into_iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| {
            *p != ours && {
                // Built for another major version than the one under test?
                let text = std::fs::read(p).unwrap_or_default();
                let want = format!("Open MPI {}.", ompi_major());
                !text.windows(want.len()).any(|w| w == want.as_bytes())
            }
        })
        .collect();
    others.sort();
    others.dedup();
    if others.is_empty() {
        eprintln!("no build for another Open MPI release line in target/: not checked in this run");
        return;
    }
    for other in others {
        let dir = scratch("other-build");
        std::fs::copy(&other, dir.join("mca_coll_hwbarr.so")).unwrap();
        let mut c = Command::new("timeout");
        c.args(["-k", "5", "60", "mpirun"]).args(rte::oversubscribe()).args(["-np", "2"]);
        c.args(["--mca", "mca_base_component_path", &format!("{}:{}", dir.display(), pkglib())]);
        c.args(["--mca", "coll_hwbarr_verbose", "2"]);
        c.arg(target_dir().join("examples/barrier_check")).args(["semantics", "20"]);
        let b = board();
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").env("HWBARR_BOARD", &b);
        let job = run(c, 60);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        let what = other.display();
        assert!(job.ok(), "{what}: {}", job.dump());
        let err = job.stderr();
        let refused = err.matches("but is loaded by Open MPI").count();
        let lib = ompi_dependency(&other);
        if our_libdirs().iter().any(|d| d.join(&lib).exists()) {
            assert!(!err.contains("unable to open"), "{what}: dlopen failed: {}", job.dump());
            assert_eq!(refused, 1, "{what}: {}", job.dump());
        } else {
            let unopened = err.lines().filter(|l| l.contains("unable to open") && l.contains(&lib)).count();
            assert!(refused == 1 || unopened > 0, "{what} (needs {lib}): {}", job.dump());
        }
        assert!(!err.contains("served"), "{what}: the foreign build must not serve: {}", job.dump());
    }
}

/// The Open MPI library a build of hwbarr names as its dependency
/// (build.rs): libmpi.so.N or libopen_mpi.so.N.
fn ompi_dependency(so: &Path) -> String {
    let out = Command::new("readelf").arg("-d").arg(so).output().expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|l| l.split_once("Shared library: [")?.1.split_once(']').map(|(n, _)| n.to_string()))
        .find(|n| n.starts_with("libmpi.so") || n.starts_with("libopen_mpi.so"))
        .unwrap_or_else(|| panic!("{so:?} names no Open MPI library: {text}"))
}

/// The library directories of the Open MPI under test.
fn our_libdirs() -> Vec<PathBuf> {
    let out = Command::new("mpicc").arg("--showme:libdirs").output().expect("mpicc");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(PathBuf::from).collect()
}

/// Another shared-memory barrier component raised above hwbarr's priority
/// takes the barrier slots; raised only above tuned's (below hwbarr's), it
/// leaves them to hwbarr. On 6.0, where each module installs its own
/// functions at enable, Open MPI's own selection report (coll_base_verbose)
/// names the winner of MPI_Barrier, MPI_Ibarrier and the persistent
/// barrier on every communicator; the jobs create and free communicators
/// in many orders (the semantics check).
#[test]
fn a_peer_above_or_below_hwbarrs_priority_wins_or_leaves_the_slots() {
    // 4.1 and 5.0: coll/sm; 6.0: xhc and acoll (acoll serves 2 ranks and
    // up only with its size threshold lowered).
    let peers: Vec<(&str, Vec<(&str, &str)>)> = if ompi_major() >= 6 {
        vec![("xhc", vec![]), ("acoll", vec![("coll_acoll_comm_size_thresh", "2")])]
    } else {
        vec![("sm", vec![])]
    };
    for (peer, extra) in peers {
        for (prio, hwbarr_wins) in [("60", false), ("35", true)] {
            let b = board();
            let prio_param = format!("coll_{peer}_priority");
            let mut mca = vec![(prio_param.as_str(), prio), ("coll_hwbarr_verbose", "2")];
            mca.extend(extra.iter().copied());
            if ompi_major() >= 6 {
                mca.push(("coll_base_verbose", "21"));
            }
            let job = mpirun(4, &mca, &[("HWBARR_BOARD", b.to_str().unwrap())], &["semantics", "40"], 120);
            let _ = std::fs::remove_dir_all(b.parent().unwrap());
            let what = format!("{peer} at priority {prio}");
            assert!(job.ok() && job.stdout().matches("semantics OK").count() == 4, "{what}: {}", job.dump());
            let err = job.stderr();
            let served = served(&err, 0);
            if hwbarr_wins {
                assert_eq!(served, vec![40; 4], "{what}: hwbarr serves MPI_COMM_WORLD: {}", job.dump());
            } else {
                assert!(served.is_empty(), "{what}: {peer} serves MPI_COMM_WORLD: {}", job.dump());
            }
            if ompi_major() >= 6 {
                let want = if hwbarr_wins { "hwbarr" } else { peer };
                // What Open MPI reports as each slot's owner on
                // MPI_COMM_WORLD, rank by rank (the peers build internal
                // communicators of their own, with their own choices).
                for func in ["barrier", "ibarrier", "barrier_init"] {
                    let owners: Vec<&str> = err
                        .lines()
                        .filter(|l| l.contains("communicator MPI_COMM_WORLD "))
                        .filter_map(|l| l.split_once(&format!(" {func} -> ")))
                        .map(|(_, o)| o.trim())
                        .collect();
                    // The peers serve only the blocking barrier: the
                    // others stay hwbarr's whatever the peer's priority.
                    let want = if func == "barrier" { want } else { "hwbarr" };
                    assert_eq!(owners, vec![want; 4], "{what}: {func}: {}", job.dump());
                }
            }
        }
    }
}

/// The MPI_T performance variable `coll_hwbarr_barriers`, bound to a
/// communicator, counts what hwbarr served there (the same number as its
/// verbose line), 0 on MPI_COMM_SELF (declined) and 0 everywhere when
/// hwbarr is disabled by priority.
#[test]
fn mpi_t_pvar_counts_the_barriers_served() {
    let iters = 150u64;
    for (alg, prio, want) in
        [("counter", "40", 2 * iters), ("toggle", "40", 2 * iters), ("linear", "40", 2 * iters), ("auto", "0", 0)]
    {
        let it = iters.to_string();
        let job = mpirun(
            3,
            &[("coll_hwbarr_algorithm", alg), ("coll_hwbarr_priority", prio), ("coll_hwbarr_verbose", "2")],
            &[],
            &["pvar", &it],
            60,
        );
        assert!(job.ok(), "{alg}\n{}", job.dump());
        let lines: Vec<String> = job.stdout().lines().filter(|l| l.contains(": pvar ")).map(String::from).collect();
        assert_eq!(lines.len(), 3, "{alg}\n{}", job.dump());
        for l in &lines {
            assert!(l.ends_with(&format!("pvar dup={want} self=0 at_bind=0")), "{alg}: {l}\n{}", job.dump());
        }
        if want > 0 {
            let cid = first_cids(&job.stderr(), 1);
            assert_eq!(served(&job.stderr(), cid[0]), vec![want; 3], "{alg}: verbose agrees\n{}", job.dump());
        }
    }
}

/// An Open MPI named by OMPI_PREFIX without its component headers: the
/// build's prerequisites check says so in one line naming that prefix and
/// how to get them, and never installs Debian's Open MPI for it.
#[test]
fn a_prefix_without_component_headers_is_named_and_nothing_is_installed() {
    let prefix = scratch("headerless-ompi");
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(prefix.join("include")).unwrap();
    let mpicc = format!(
        "#!/bin/sh\ncase \"$1\" in\n  --showme:incdirs) echo {p}/include ;;\n  --showme:libdirs) echo {p}/lib ;;\n  \
         --showme:version) echo 'mpicc: Open MPI 6.0.0a1 (Language: C)' ;;\nesac\n",
        p = prefix.display()
    );
    for (name, text) in [("mpicc", mpicc.as_str()), ("mpirun", "#!/bin/sh\nexit 0\n")] {
        std::fs::write(bin.join(name), text).unwrap();
        let st = Command::new("chmod").arg("+x").arg(bin.join(name)).status().unwrap();
        assert!(st.success());
    }
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh"))
        .env("OMPI_PREFIX", &prefix)
        .output()
        .expect("deps.sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&prefix);
    let what = format!("status {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", out.status);
    assert_eq!(out.status.code(), Some(1), "{what}");
    assert!(!stdout.contains("installing") && !stderr.contains("installing"), "{what}");
    assert_eq!(stderr.lines().count(), 1, "one line: {what}");
    assert!(
        stderr.contains("6.0.0a1")
            && stderr.contains(&prefix.display().to_string())
            && stderr.contains("no component headers")
            && stderr.contains("--with-devel-headers"),
        "{what}"
    );
}
