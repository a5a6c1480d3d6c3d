#!/usr/bin/env python3
"""`make bench`: MPI_Barrier of hwbarr beside every barrier this Open MPI
ships, MPICH's shared-memory barrier and the scheduler's floor, the OSU way,
interleaved and repeated in one run.

Every round runs every (ranks, configuration) pair once, in an order
shuffled anew each round (seed printed; SEED=<n> repeats it). One program,
bench/barrier_osu.c, built with the mpicc of each MPI under test, measures
every MPI configuration: OSU method (warm-up, timed loop, each rank's mean,
average/min/max over ranks), then the exit-time skew across ranks over a
sample of barriers and where the ranks ran; its persistent mode gives
persistent/blocking from one launch. The floor is examples/sched_floor.rs
(the faster of hwbarr's counter and line cores in plain processes); the
pace section also runs the floor's protocol inside the MPI launch, by the
same processes, and reads the targets against it.
Ratios are taken within a round (same machine state) and their median over
rounds is reported. OSU_DIR=<dir> runs the real osu_barrier instead (no
skew or placement then).

Environment: ROUNDS (5), NPS (2,4,8), SEED, SECTIONS
(barrier,threads,load,progress,pace,help,ibarrier,fakenodes,init: which
parts run), PACE_LAUNCHES (6), PROGRESS_LAUNCHES (3), HELP_LAUNCHES (3), MPICH_VENV
(build/mpich-venv, made by scripts/deps.sh bench; NO_MPICH=1 leaves MPICH
out), MPICH_TIMEOUT (60 s per MPICH launch), INIT_LAUNCHES (100), BIND (1:
the barrier section's launches bind rank i to cpu i mod cpus).

Writes build/bench[-ompi-<version>]/barrier.csv, persistent.csv,
ibarrier.csv, fakenodes.csv, model.csv, init.csv and the charts, and prints
the tables and the issue-20 targets.
"""
import csv
import math
import os
import random
import re
import shutil
import signal
import statistics as st
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("HWBARR_TARGET_DIR", os.path.join(ROOT, "target"))


def ompi_version():
    """(major, minor, patch) for the logic, and the full label ("6.0.0a1")."""
    out = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Open MPI v((\d+)\.(\d+)\.(\d+)\S*)", out)
    if not m:
        return (0, 0, 0), "unknown"
    return tuple(int(x) for x in m.groups()[1:]), m.group(1)


OMPI, OMPI_LABEL = ompi_version()
OMPI5 = OMPI[0] >= 5
OMPI6 = OMPI[0] >= 6
# 4.1's figures stay in build/bench (as before); other versions get their own.
OUT = os.path.join(ROOT, "build", "bench" if OMPI[:2] == (4, 1) else "bench-ompi-" + OMPI_LABEL)
# Launcher spellings: 4.1's ORTE, 5.0's and 6.0's PRRTE.
OVERSUB = ["--map-by", ":OVERSUBSCRIBE"] if OMPI5 else ["--oversubscribe"]
SHM_BTL = "sm" if OMPI5 else "vader"
COMPONENT_DIR = os.environ.get("COMPONENT_DIR", os.path.join(ROOT, "build", "components"))
OSU_DIR = os.environ.get("OSU_DIR")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
NPS = [int(x) for x in os.environ.get("NPS", "2,4,8").split(",")]
# BIND=1: the barrier section's launches bind rank i to cpu i mod cpus (the
# floor's processes too), so every configuration runs on the same layout;
# unbound (default), the kernel lays them out at launch, often unevenly
# (3+1) when ranks outnumber cpus.
BIND = os.environ.get("BIND") == "1"
SEED = int(os.environ.get("SEED", str(int(time.time()) % 100000)))
SECTIONS = os.environ.get("SECTIONS", "barrier,threads,load,progress,pace,help,ibarrier,fakenodes,init").split(",")
THREADS_LAUNCHES = int(os.environ.get("THREADS_LAUNCHES", "9"))
LOAD_LAUNCHES = int(os.environ.get("LOAD_LAUNCHES", "3"))
INIT_LAUNCHES = int(os.environ.get("INIT_LAUNCHES", "100"))
NCPUS = os.cpu_count() or 1
ITERS = {2: 20000, 4: 5000, 8: 2000}
SAMPLE = 1000  # barriers whose exit times are taken, after the timed loop
MPICH_VENV = os.environ.get("MPICH_VENV", os.path.join(ROOT, "build", "mpich-venv"))
MPICH_TIMEOUT = float(os.environ.get("MPICH_TIMEOUT", "60"))
# MPICH busy-polls: with more ranks than cores a barrier waits for the
# scheduler's time slice (milliseconds), so it gets far fewer iterations.
MPICH_ITERS = {2: (5000, 500, 1000), 4: (200, 20, 100), 8: (50, 10, 50)}  # iters, warm-up, sample

REST = "basic,libnbc,self"
HWARGS = {a: ["--mca", "coll", "hwbarr,tuned," + REST, "--mca", "coll_hwbarr_algorithm", a]
          for a in ("toggle", "counter", "line", "polled", "auto")}
# name -> ("ompi", mpirun args) | ("mpich", None) | ("floor", None)
CONFIGS = [
    ("hwbarr:toggle", ("ompi", HWARGS["toggle"])),
    ("hwbarr:counter", ("ompi", HWARGS["counter"])),
    ("hwbarr:line", ("ompi", HWARGS["line"])),
    ("hwbarr:polled", ("ompi", HWARGS["polled"])),
    ("hwbarr:auto", ("ompi", HWARGS["auto"])),
    ("tuned", ("ompi", ["--mca", "coll", "tuned," + REST])),
    ("basic", ("ompi", ["--mca", "coll", REST])),
] + ([
    # 4.1's and 5.0's shared-memory component (gone in 6.0).
    ("sm", ("ompi", ["--mca", "coll", "sm,tuned," + REST, "--mca", "coll_sm_priority", "100"])),
] if not OMPI6 else []) + ([
    # 5.0's hierarchical component (on by default there, priority 35; 6.0's
    # declines a single node).
    ("han", ("ompi", ["--mca", "coll", "han,sm,tuned," + REST, "--mca", "coll_han_priority", "100"])),
] if OMPI5 and not OMPI6 else []) + ([
    # 6.0's shared-memory barriers, priority 0 by default: raised.
    ("xhc", ("ompi", ["--mca", "coll", "xhc,tuned," + REST, "--mca", "coll_xhc_priority", "100"])),
    ("acoll", ("ompi", ["--mca", "coll", "acoll,tuned," + REST, "--mca", "coll_acoll_priority", "100",
                        "--mca", "coll_acoll_comm_size_thresh", "2"])),
] if OMPI6 else []) + [
    # MPICH's release_gather barrier (added below when its venv is there).
    ("mpich", ("mpich", None)),
    # Not MPI: the scheduler's floor (examples/sched_floor.rs), same rounds.
    ("floor", ("floor", None)),
]
# The persistent barrier against MPI_Barrier, one launch each (persistent mode).
PERSISTENT = ["hwbarr:toggle", "hwbarr:counter", "hwbarr:line", "hwbarr:polled", "hwbarr:auto"]
# "hwbarr best": the fastest by median (auto is one of them)
HW = ["hwbarr:toggle", "hwbarr:counter", "hwbarr:line", "hwbarr:polled"]


def pkglibdir():
    out = subprocess.run(["ompi_info", "--path", "pkglibdir", "--parsable"], capture_output=True, text=True).stdout
    return out.strip().split(":")[-1]


PKGLIB = pkglibdir()
ENV = dict(os.environ)
if os.geteuid() == 0:
    ENV.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


class Timeout(Exception):
    pass


def run(cmd, timeout, env):
    """Runs cmd in its own process group; on timeout kills the whole group
    (launcher daemons and ranks too) and raises Timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise Timeout(f"{' '.join(cmd)}: no result after {timeout:.0f} s")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return out


def mpirun(np, args, prog, with_hwbarr=True, timeout=300, env=None, wrap=(), bind=False):
    # Ours first: it shadows an hwbarr installed into Open MPI's own directory.
    path = (COMPONENT_DIR + ":" if with_hwbarr else "") + PKGLIB
    if not bind:
        place = OVERSUB + ["--bind-to", "none"]
    elif OMPI5:
        place = ["--map-by", "core:OVERSUBSCRIBE", "--bind-to", "core:overload-allowed"]
    else:
        place = ["--oversubscribe", "--map-by", "core", "--bind-to", "core:overload-allowed"]
    cmd = list(wrap) + ["mpirun"] + place + ["-np", str(np),
           "--mca", "mca_base_component_path", path] + args + prog
    return run(cmd, timeout, env or ENV)


def build_prog(mpicc, out, env=None):
    """bench/barrier_osu.c built with `mpicc` into `out` (when older than the source)."""
    src = os.path.join(ROOT, "bench", "barrier_osu.c")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [mpicc, "-O2", "-Wall", "-o", out, src]
    print("  " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
    subprocess.run(cmd, check=True, env=env or ENV)
    return out


# ---- MPICH: the wheel from PyPI in a venv of its own (scripts/deps.sh bench).
# Its mpiexec is hydra; `-launcher fork` starts the ranks locally without
# ssh or a network. UCX_TLS=self,sm keeps its UCX netmod on shared memory
# (no device probing); ranks on one node talk through ch4's posix shm anyway.
# MPIR_CVAR_BARRIER_POSIX_INTRA_ALGORITHM=release_gather names the
# shared-memory barrier that `auto` picks; it applies to single-threaded
# processes (barrier_osu calls MPI_Init) after the first
# MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD (5) collectives, which the warm-up
# covers. check_mpich() verifies by timing that it is in effect.
MPICH_BIN = os.path.join(MPICH_VENV, "bin")
MPICH_ENV = {k: v for k, v in ENV.items() if k != "LD_LIBRARY_PATH" and not k.startswith("OMPI_")}
MPICH_ENV.update(PATH=MPICH_BIN + ":" + ENV.get("PATH", ""), UCX_TLS="self,sm",
                 MPIR_CVAR_BARRIER_POSIX_INTRA_ALGORITHM="release_gather")
MPICH = None  # (version, program) when usable
MPICH_TRIED = False


def mpich_setup():
    global MPICH, MPICH_TRIED
    if MPICH_TRIED:
        return
    MPICH_TRIED = True
    if os.environ.get("NO_MPICH"):
        print("MPICH: left out (NO_MPICH set)")
        return
    if not os.access(os.path.join(MPICH_BIN, "mpiexec"), os.X_OK):
        print(f"MPICH: not installed in {os.path.relpath(MPICH_VENV, ROOT)} (pip install mpich failed or PyPI "
              f"unreachable; scripts/deps.sh bench makes it): running without MPICH")
        return
    out = subprocess.run([os.path.join(MPICH_BIN, "mpichversion")], capture_output=True, text=True,
                         env=MPICH_ENV).stdout
    m = re.search(r"MPICH Version:\s*(\S+)", out)
    version = m.group(1) if m else "unknown"
    prog = build_prog(os.path.join(MPICH_BIN, "mpicc"),
                      os.path.join(ROOT, "build", "barrier_osu", "mpich-" + version), MPICH_ENV)
    MPICH = (version, prog)


def mpiexec(np, prog_args, extra_env=None, timeout=None, bind=False):
    env = dict(MPICH_ENV, **(extra_env or {}))
    cmd = [os.path.join(MPICH_BIN, "mpiexec"), "-launcher", "fork", "-hosts", "localhost",
           "-bind-to", "core" if bind else "none",
           "-np", str(np), MPICH[1]] + prog_args
    return run(cmd, timeout or MPICH_TIMEOUT, env)


def check_mpich():
    """Is release_gather in effect? At 2 ranks, alternate launches with it
    and with `mpir` (MPICH's point-to-point barrier) forced; the libmpi of
    the wheel is stripped, so the timing tells."""
    rg, pp = [], []
    try:
        for _ in range(3):
            for alg, into in (("release_gather", rg), ("mpir", pp)):
                out = mpiexec(2, ["500", "50", "0"], {"MPIR_CVAR_BARRIER_POSIX_INTRA_ALGORITHM": alg})
                into.append(float(re.search(r"avg_us=([\d.]+)", out).group(1)))
    except (Timeout, RuntimeError) as e:
        print(f"MPICH {MPICH[0]}: release_gather not verified: {str(e).splitlines()[0]}")
        return False
    r = st.median(p / g for p, g in zip(pp, rg))
    ok = r >= 2.0
    print(f"MPICH {MPICH[0]} (PyPI wheel, {os.path.relpath(MPICH_VENV, ROOT)}), barrier release_gather: at 2 ranks "
          f"{st.median(rg):.3f} µs against {st.median(pp):.3f} µs with the point-to-point barrier (mpir) forced, "
          f"{r:.1f}× slower, median of 3 pairs: release_gather {'in effect' if ok else 'NOT confirmed (ratio < 2)'}")
    return ok


HANDOFF = []  # µs of one sched_yield hand-off, one per floor run
OSU_PROG = None  # bench/barrier_osu.c built for this Open MPI (osu_prog)
FIELDS = ["avg_us", "min_us", "max_us", "sample_avg_us", "skew_med_us", "skew_p99_us", "skew_max_us"]


def osu_prog():
    """bench/barrier_osu.c built for this Open MPI, once per run (every section uses it)."""
    global OSU_PROG
    if OSU_PROG is None:
        OSU_PROG = build_prog("mpicc", os.path.join(ROOT, "build", "barrier_osu", "ompi-" + OMPI_LABEL))
    return OSU_PROG


def parse_osu(out):
    kv = {k: float(v) for k, v in re.findall(r"(\w+_us|ratio|ratio_med)=([\d.]+)", out)}
    m = re.search(r"placement=(\S+)", out)
    kv["placement"] = m.group(1) if m else ""
    return kv


def barrier_run(np, config):
    """One launch: a dict with avg_us, min_us, max_us and, from barrier_osu,
    sample_avg_us, skew_*_us and placement."""
    kind, args = dict(CONFIGS)[config]
    iters = ITERS.get(np, 2000)
    if kind == "floor":
        out = run([os.path.join(TARGET, "release/examples/sched_floor"), str(np), str(iters)] + (["bind"] if BIND else []),
                  300, ENV)
        HANDOFF.append(float(re.search(r"handoff_us=([\d.]+)", out).group(1)))
        kv = {k: float(v) for k, v in re.findall(r"(\w+_us)=([\d.]+)", out) if k in FIELDS}
        m = re.search(r"placement=(\S+)", out)
        kv["placement"] = m.group(1) if m else ""
        return kv
    if kind == "mpich":
        it, warm, sample = MPICH_ITERS.get(np, MPICH_ITERS[8])
        return parse_osu(mpiexec(np, [str(it), str(warm), str(sample)], bind=BIND))
    if OSU_DIR:
        out = mpirun(np, args, [os.path.join(OSU_DIR, "osu_barrier"), "-f", "-i", str(iters)], bind=BIND)
        nums = [l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")]
        vals = [float(x) for x in nums[-1]]
        return dict(zip(["avg_us", "min_us", "max_us"], vals if len(vals) >= 3 else vals[:1] * 3))
    return parse_osu(mpirun(np, args, [osu_prog(), str(iters), str(iters // 10), str(SAMPLE)], bind=BIND))


def persistent_run(np, config):
    _, args = dict(CONFIGS)[config]
    return parse_osu(mpirun(np, args, [osu_prog(), "persistent", str(ITERS.get(np, 2000)), str(ITERS.get(np, 2000) // 10)],
                            bind=BIND))


def init_cost():
    """MPI_Init+MPI_Finalize µs (slowest rank) of each launch with and without hwbarr, alternating."""
    prog = [os.path.join(TARGET, "release/examples/init_cost")]
    res = {True: [], False: []}
    rows = []
    for i in range(INIT_LAUNCHES):
        for with_hw in (i % 2 == 0, i % 2 != 0):
            out = mpirun(2, [], prog, with_hwbarr=with_hw)
            t = max(int(x) for x in re.findall(r"init_finalize_us=(\d+)", out))
            res[with_hw].append(t)
            rows.append((i, "with" if with_hw else "without", t))
        print(f"\r  init/finalize launches {i + 1}/{INIT_LAUNCHES}", end="", flush=True)
    print()
    with open(os.path.join(OUT, "init.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["launch", "hwbarr", "init_finalize_us"])
        w.writerows(rows)
    return res[True], res[False]


IB_CONFIGS = [
    ("hwbarr:toggle", ["--mca", "coll", "hwbarr,tuned," + REST, "--mca", "coll_hwbarr_algorithm", "toggle"]),
    ("hwbarr:counter", ["--mca", "coll", "hwbarr,tuned," + REST, "--mca", "coll_hwbarr_algorithm", "counter"]),
    ("libnbc", ["--mca", "coll", "tuned," + REST]),
]


def ibarrier_bench():
    """osu_ibarrier-style overlap and persistent vs blocking latency."""
    prog = os.path.join(TARGET, "release/examples/ibarrier_bench")
    rows, res = [], {}
    total, done = ROUNDS * len(NPS) * len(IB_CONFIGS), 0
    for rnd in range(ROUNDS):
        for np in NPS:
            for c, args in IB_CONFIGS:
                out = mpirun(np, args, [prog, str(ITERS.get(np, 2000) // 2)])
                kv = dict(re.findall(r"(\w+)=([\d.]+)", out))
                res[(rnd, np, c)] = {k: float(v) for k, v in kv.items()}
                rows.append([rnd, np, c] + [kv[k] for k in IB_FIELDS])
                done += 1
                print(f"\r  ibarrier [{done}/{total}] np={np} {c:<15} overlap {kv['overlap_pct']:>5}%   ",
                      end="", flush=True)
    print()
    with open(os.path.join(OUT, "ibarrier.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "ranks", "config"] + IB_FIELDS)
        w.writerows(rows)
    med = lambda np, c, k: st.median(res[(r, np, c)][k] for r in range(ROUNDS))
    print(f"\nMPI_Ibarrier (osu_ibarrier method) and persistent barrier, medians of {ROUNDS} rounds:")
    print(f"{'ranks':>5} {'config':<15} {'pure_us':>8} {'overall_us':>10} {'compute_us':>10} {'overlap%':>8} "
          f"{'ceiling%':>8} {'blocking_us':>11} {'persistent_us':>13} {'pers/block':>10}")
    verdicts = []
    for np in NPS:
        for c, _ in IB_CONFIGS:
            ratio = st.median(res[(r, np, c)]["persistent_us"] / res[(r, np, c)]["blocking_us"] for r in range(ROUNDS))
            print(f"{np:>5} {c:<15} {med(np, c, 'pure_us'):>8.3f} {med(np, c, 'overall_us'):>10.3f} "
                  f"{med(np, c, 'compute_us'):>10.3f} {med(np, c, 'overlap_pct'):>8.1f} {med(np, c, 'ceiling_pct'):>8.1f} "
                  f"{med(np, c, 'blocking_us'):>11.3f} {med(np, c, 'persistent_us'):>13.3f} {ratio:>10.2f}")
            if c.startswith("hwbarr"):
                ov = med(np, c, "overlap_pct")
                cap = med(np, c, "ceiling_pct")
                verdicts.append((f"np={np} {c}: overlap ≥ 95% (ceiling of the method here: {cap:.1f}%)",
                                 f"{ov:.1f}%", ov >= 95))
    print("Targets (the persistent/blocking target is read from the barrier section's same-launch blocks):")
    for what, v, ok in verdicts:
        print(f"  {'MET ' if ok else 'MISS'} {what}: {v}")


LAYOUTS = ["nodea:1,nodeb:1", "nodea:2,nodeb:2", "nodea:1,nodeb:2,nodec:1", "nodea:1,nodeb:1,nodec:1,noded:1"]
FN_CONFIGS = [
    ("hwbarr:auto", ["--mca", "coll", "hwbarr,tuned," + REST]),
    ("hwbarr:dissemination", ["--mca", "coll", "hwbarr,tuned," + REST, "--mca", "coll_hwbarr_inter", "dissemination"]),
    ("tuned", ["--mca", "coll", "tuned," + REST]),
] + ([("han", ["--mca", "coll", ("han,tuned," if OMPI6 else "han,sm,tuned,") + REST,
                "--mca", "coll_han_priority", "100"])] if OMPI5 else [])


def fake_launch(hosts, args, prog):
    """Runs `prog` over fake nodes `hosts` (like "nodea:1,nodeb:1")."""
    import tempfile
    np = sum(int(h.split(":")[1]) for h in hosts.split(","))
    with tempfile.TemporaryDirectory(prefix="hwbarr-fakenodes-") as root:
        env = dict(ENV, HWBARR_FAKENODE_ROOT=root)
        agent = os.path.join(ROOT, "scripts/fakenode-agent")
        # PRRTE (5.0) calls its rsh launcher "ssh" and refuses a loopback-only
        # out-of-band interface list; ORTE (4.1) wants it.
        rte = ["--prtemca", "plm_ssh_agent", agent] if OMPI5 else \
            ["--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", "lo"]
        launch = ["--host", hosts] + rte + ["--mca", "btl", "self," + SHM_BTL + ",tcp", "--mca", "btl_tcp_if_include", "lo",
                                            "--mca", "mpi_yield_when_idle", "1"]
        return mpirun(np, launch + args, prog, env=env)


# Assumed (not measured here) Blue Gene/P-like torus figures for the
# patent's deposit-bit broadcast: per-hop latency, time of one 32-byte
# packet on a 425 MB/s link, links per node, DMA injection overhead.
AUTO_COUNTER_MAX_NODES = 3  # src/inter.rs
TORUS_HOP_US = 0.1
TORUS_PKT_US = 32 / 425.0
TORUS_LINKS = 6
TORUS_INJECT_US = 0.5


def model(t1, g, n):
    """Predicted inter-node barrier latency (µs) for n nodes.
    t1: one-way time of a zero-byte message (rtt/2); g: extra cost per
    additional message a leader sends or receives in a burst."""
    import math
    counter = t1 + (n - 2) * g
    dissemination = math.ceil(math.log2(n)) * t1
    k = math.ceil(n ** (1 / 3))
    diameter = 3 * (k // 2)
    # One packet per axis line with the deposit bit; every node still
    # receives n-1 packets (one decrement each) over its links.
    torus = TORUS_INJECT_US + diameter * TORUS_HOP_US + (n - 1) * TORUS_PKT_US / TORUS_LINKS
    return counter, dissemination, torus


def scale_model(measured):
    """LogP-style scale model from message costs measured across 2 fake
    nodes; predictions from 2 to 100,000 nodes, crossovers, and the gap to
    the fake-node measurements (`measured`: layout -> {config: µs})."""
    prog = [os.path.join(TARGET, "release/examples/logp"), "2000"]
    vals = []
    for i in range(ROUNDS):
        out = fake_launch("nodea:1,nodeb:1", [], prog)
        vals.append({k: float(v) for k, v in re.findall(r"(\w+)_us=([\d.]+)", out)})
        print(f"\r  message costs {i + 1}/{ROUNDS}", end="", flush=True)
    print()
    rtt = st.median(v["rtt"] for v in vals)
    o = st.median(v["o"] for v in vals)
    g = st.median(v["g"] for v in vals)
    t1 = rtt / 2
    print(f"\nScale model. Measured across 2 fake nodes (TCP on loopback), medians of {ROUNDS}: "
          f"round trip {rtt:.2f} µs (one way t1 = {t1:.2f}), send overhead o {o:.2f} µs, gap g {g:.2f} µs.")
    print("  counter broadcast: t1 + (N-2)·max(g,o);  dissemination: ⌈log2 N⌉·t1;")
    print(f"  torus deposit-bit broadcast (assumed BG/P-like: {TORUS_HOP_US} µs/hop, {TORUS_PKT_US:.3f} µs/packet, "
          f"{TORUS_LINKS} links, {TORUS_INJECT_US} µs injection): inject + 3⌊k/2⌋ hops + (N-1) packets / links, k = ⌈N^(1/3)⌉")
    gg = max(g, o)
    ns = sorted({int(round(10 ** (i / 8))) for i in range(3, 41)} | {2, 3, 4, 100000})
    rows = [(n,) + model(t1, gg, n) for n in ns]
    with open(os.path.join(OUT, "model.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["nodes", "counter_us", "dissemination_us", "torus_us"])
        w.writerows([(n, f"{c:.3f}", f"{d:.3f}", f"{t:.3f}") for n, c, d, t in rows])
    cross = next((n for n in range(3, 100001) if model(t1, gg, n)[0] > model(t1, gg, n)[1]), None)
    print(f"  crossover counter → dissemination at {cross} nodes (auto switches above "
          f"{AUTO_COUNTER_MAX_NODES} nodes); at 100,000 nodes: counter {rows[-1][1] / 1e3:.0f} ms, dissemination "
          f"{rows[-1][2]:.0f} µs, torus {rows[-1][3]:.0f} µs")
    print("  prediction against the fake-node measurement (inter-node phase only; the measurement adds")
    print("  local phases and the scheduling of 4 processes on 2 cores):")
    for hosts, nodes in (("nodea:1,nodeb:1", 2), ("nodea:1,nodeb:1,nodec:1,noded:1", 4)):
        c, d, _ = model(t1, gg, nodes)
        m = measured.get(hosts, {})
        mc, md = m.get("hwbarr:auto"), m.get("hwbarr:dissemination")
        if mc and md:
            print(f"    {hosts}: counter predicted {c:.1f} measured {mc:.1f} (×{mc / c:.1f}); "
                  f"dissemination predicted {d:.1f} measured {md:.1f} (×{md / d:.1f})")
    if shutil.which("gnuplot"):
        png = os.path.join(OUT, "model.png")
        script = f"""
set terminal pngcairo size 900,560 font ',11'
set output '{png}'
set datafile separator ','
set title 'Predicted barrier latency among N nodes (t1={t1:.1f} us, g={gg:.1f} us measured on fake nodes)'
set xlabel 'nodes'; set ylabel 'latency (us)'; set logscale xy; set grid; set key left top
plot '{os.path.join(OUT, "model.csv")}' every ::1 using 1:2 with lines lw 2 title 'counter broadcast (PML)', \
     '' every ::1 using 1:3 with lines lw 2 title 'dissemination (PML)', \
     '' every ::1 using 1:4 with lines lw 2 title 'torus deposit-bit broadcast (assumed BG/P figures)'
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f"  chart: {os.path.relpath(png, ROOT)}")


def fake_nodes_bench():
    """Barrier latency across fake nodes (scripts/fakenode-agent), hwbarr
    against tuned on the same layout, both with mpi_yield_when_idle 1."""
    prog = [os.path.join(TARGET, "release/examples/barrier_bench"), "2000"]
    res, rows = {}, []
    total, done = ROUNDS * len(LAYOUTS) * len(FN_CONFIGS), 0
    for rnd in range(ROUNDS):
        for hosts in LAYOUTS:
            for c, args in FN_CONFIGS:
                out = fake_launch(hosts, args, prog)
                a = float(re.search(r"avg_us=([\d.]+)", out).group(1))
                res[(rnd, hosts, c)] = a
                rows.append([rnd, hosts, c, f"{a:.3f}"])
                done += 1
                print(f"\r  fake nodes [{done}/{total}] {hosts:<32} {c:<22} {a:9.2f} us   ", end="", flush=True)
    print()
    with open(os.path.join(OUT, "fakenodes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "hosts", "config", "avg_us"])
        w.writerows(rows)
    print(f"\nAcross fake nodes (TCP between nodes, mpi_yield_when_idle 1), µs, medians of {ROUNDS} rounds:")
    print(f"{'layout':<34} " + " ".join(f"{c:>22}" for c, _ in FN_CONFIGS) + f" {'auto/tuned':>11}")
    verdicts = []
    for hosts in LAYOUTS:
        meds = [st.median(res[(r, hosts, c)] for r in range(ROUNDS)) for c, _ in FN_CONFIGS]
        ratio = st.median(res[(r, hosts, "hwbarr:auto")] / res[(r, hosts, "tuned")] for r in range(ROUNDS))
        extra = ""
        if OMPI5:
            rh = st.median(res[(r, hosts, "hwbarr:auto")] / res[(r, hosts, "han")] for r in range(ROUNDS))
            extra = f"  auto/han {rh:.2f}"
        print(f"{hosts:<34} " + " ".join(f"{m:>22.2f}" for m in meds) + f" {ratio:>11.2f}" + extra)
        if hosts in ("nodea:2,nodeb:2", "nodea:1,nodeb:1,nodec:1,noded:1"):
            verdicts.append((f"{hosts}: hwbarr ≤ 0.5× tuned", ratio, ratio <= 0.5))
    print("Targets:")
    for what, r, ok in verdicts:
        print(f"  {'MET ' if ok else 'MISS'} {what}: {r:.2f}")
    return {h: {c: st.median(res[(r, h, c)] for r in range(ROUNDS)) for c, _ in FN_CONFIGS} for h in LAYOUTS}


IB_FIELDS = ["pure_us", "compute_us", "overall_us", "overlap_pct", "init_us", "wait_us", "blocking_us", "persistent_us",
             "timer_us", "ceiling_pct"]


def placement_ranks(p):
    """A launch's placement field: (start cpu, end cpu, distinct cpus) per rank."""
    return [re.match(r"\d+:(-?\d+)>(-?\d+)(?:/(\d+))?", x).groups() for x in p.split(",")]


def placement_layout(p):
    """'2+2': ranks per cpu at the start, largest first ('?' if not recorded)."""
    if not p:
        return "?"
    per_cpu = {}
    for s, _, _ in placement_ranks(p):
        per_cpu[s] = per_cpu.get(s, 0) + 1
    return "+".join(str(c) for c in sorted(per_cpu.values(), reverse=True))


def placement_summary(places):
    """'1+1:4 2:1 moved 1/5': how many launches started with each layout of
    ranks over cpus (ranks per cpu, largest first), and in how many some rank
    ended on another cpu than it started or saw more than one in the sample."""
    layouts, moved, n = {}, 0, 0
    for p in places:
        if not p:
            continue
        n += 1
        key = placement_layout(p)
        layouts[key] = layouts.get(key, 0) + 1
        moved += any(s != e or (d and int(d) > 1) for s, e, d in placement_ranks(p))
    if not n:
        return "–"
    return " ".join(f"{k}:{v}" for k, v in sorted(layouts.items(), key=lambda kv: -kv[1])) + f" moved {moved}/{n}"


def chart(stats, configs):
    if not shutil.which("gnuplot"):
        print("  (no gnuplot: chart skipped; install gnuplot-nox)")
        return
    dat = os.path.join(OUT, "barrier.dat")
    with open(dat, "w") as f:
        f.write("ranks " + " ".join(f"{c}_med {c}_min {c}_max" for c in configs) + "\n")
        for np in NPS:
            vals = []
            for c in configs:
                s = stats.get((np, c))
                vals += [f"{v:.4f}" for v in s] if s else ["NaN"] * 3
            f.write(f"{np} " + " ".join(vals) + "\n")
    png = os.path.join(OUT, "barrier.png")
    n = len(configs)
    # Each configuration a little to the side, so that the min-max bars stay
    # apart; a colour of its own (gnuplot's default palette repeats after 8),
    # and the floor dashed black.
    palette = ["#1f77b4", "#17becf", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#bcbd22", "#7f7f7f", "#aec7e8", "#98df8a"]

    def style(i, c):
        if c == "floor":
            return "lc rgb '#000000' dt 2"
        return f"lc rgb '{palette[i % len(palette)]}'"
    plots = ", ".join(
        f"'{dat}' using ($1*{1 + 0.012 * (i - n / 2):.4f}):{3 * i + 2}:{3 * i + 3}:{3 * i + 4} "
        f"with yerrorlines lw 2 {style(i, c)} title '{c}'" for i, c in enumerate(configs))
    script = f"""
set terminal pngcairo size 960,600 font ',11'
set output '{png}'
set datafile missing 'NaN'
set title "MPI_Barrier latency, Open MPI {OMPI_LABEL}{" and MPICH " + MPICH[0] if MPICH else ""}: median and min-max of {ROUNDS} rounds\\n({NCPUS} cores; 4 and 8 ranks oversubscribed)" noenhanced
set xlabel 'ranks'; set ylabel 'latency (us, log scale)'
set logscale y; set logscale x 2; set xrange [1.5:{max(NPS) * 1.3}]; set xtics ({', '.join(str(n) for n in NPS)})
set key outside right; set grid
plot {plots}
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"  chart: {os.path.relpath(png, ROOT)}")


def verdict(what, r, limit, strict=False):
    if r is None:
        print(f"  ---- {what}: no measurement")
        return
    ok = r < limit if strict else r <= limit
    tail = f"MET, {limit - r:.2f} to spare" if ok else f"MISS by {r - limit:.2f}"
    print(f"  {'MET ' if ok else 'MISS'} {what}: {r:.2f}× — {tail}")


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def barrier_section():
    print(f"Open MPI {OMPI_LABEL} ({shutil.which('mpirun')}), {time.strftime('%Y-%m-%d %H:%M')}, {NCPUS} cpus, "
          f"load average {os.getloadavg()[0]:.2f}")
    osu_prog()
    mpich_setup()
    if MPICH:
        check_mpich()
    configs = [c for c, (kind, _) in CONFIGS if kind != "mpich" or MPICH]
    peers = [c for c in configs if not c.startswith("hwbarr:") and c != "floor"]
    jobs = [(np, c, "blocking") for np in NPS for c in configs] + \
           [(np, c, "persistent") for np in NPS for c in PERSISTENT]
    rng = random.Random(SEED)
    runs, pers, rows, prows = {}, {}, [], []
    total, done, t0 = ROUNDS * len(jobs), 0, time.time()
    print(f"{ROUNDS} rounds of {len(jobs)} launches, order shuffled per round (SEED={SEED})")
    for rnd in range(ROUNDS):
        order = jobs[:]
        rng.shuffle(order)
        for seq, (np, c, mode) in enumerate(order):
            status = "ok"
            try:
                res = barrier_run(np, c) if mode == "blocking" else persistent_run(np, c)
            except Timeout as e:
                if c != "mpich":
                    raise
                status, res = "timeout", {}
                print(f"\n  {e}")
            except RuntimeError as e:
                if c != "mpich":
                    raise
                status, res = "failed", {}
                print(f"\n  MPICH launch failed: {str(e).splitlines()[0]}")
            done += 1
            if mode == "blocking":
                if status == "ok":
                    runs[(rnd, np, c)] = res
                rows.append([rnd, seq, np, c, status] + [res.get(k, "") for k in FIELDS] + [res.get("placement", "")])
                shown = res.get("avg_us")
            else:
                pers[(rnd, np, c)] = res
                prows.append([rnd, seq, np, c] + [res.get(k, "") for k in ("blocking_us", "persistent_us", "ratio",
                                                                            "ratio_med")] + [res.get("placement", "")])
                shown = res.get("ratio")
            print(f"\r  [{done}/{total}] round {rnd + 1} np={np} {c:<15} {mode:<10} "
                  f"{fmt(shown) if shown is not None else status:>9} ({time.time() - t0:.0f} s)   ", end="", flush=True)
    print()
    with open(os.path.join(OUT, "barrier.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "seq", "ranks", "config", "status"] + FIELDS + ["placement"])
        w.writerows(rows)
    with open(os.path.join(OUT, "persistent.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "seq", "ranks", "config", "blocking_us", "persistent_us", "ratio", "ratio_med_blocks",
                    "placement"])
        w.writerows(prows)

    def vals(np, c, k="avg_us"):
        return [runs[(r, np, c)][k] for r in range(ROUNDS) if (r, np, c) in runs and k in runs[(r, np, c)]]

    def med(np, c, k="avg_us"):
        v = vals(np, c, k)
        return st.median(v) if v else None

    def ratio(np, a, b):
        """Median over rounds of a/b measured in the same round (rounds where both ran)."""
        v = [runs[(r, np, a)]["avg_us"] / runs[(r, np, b)]["avg_us"] for r in range(ROUNDS)
             if (r, np, a) in runs and (r, np, b) in runs]
        return st.median(v) if v else None

    stats = {(np, c): (med(np, c), min(vals(np, c)), max(vals(np, c))) for np in NPS for c in configs if vals(np, c)}
    src = "osu_barrier" if OSU_DIR else "bench/barrier_osu.c (OSU method)"
    mp = f", MPICH {MPICH[0]} release_gather" if MPICH else ""
    print(f"\nOpen MPI {OMPI_LABEL}{mp}; {time.strftime('%Y-%m-%d')}; load average now {os.getloadavg()[0]:.2f}")
    print(f"MPI_Barrier average latency (µs): median [min–max] of {ROUNDS} rounds; {src}. Exit-time skew (µs,")
    print(f"max−min exit time over ranks per sampled barrier: median and p99 over the sample, median over rounds).")
    print("Placement: ranks per cpu at the start (launches), moved = some rank changed cpu during the run;")
    print("  launches " + ("bound, rank i to cpu i mod cpus (BIND=1)." if BIND else "unbound (BIND=1 binds them)."))
    for np in NPS:
        print(f"\n  {np} ranks{' (oversubscribed)' if np > NCPUS else ''}")
        print(f"  {'config':<15} {'median':>9} {'[min – max]':>21} {'skew med':>9} {'skew p99':>9}  placement")
        for c in configs:
            if (np, c) not in stats:
                n_to = sum(1 for r in rows if r[2] == np and r[3] == c and r[4] != "ok")
                print(f"  {c:<15} {'–':>9} {'':>21} {'':>9} {'':>9}  no result ({n_to} launches timed out or failed)")
                continue
            m, lo, hi = stats[(np, c)]
            places = [runs[(r, np, c)].get("placement", "") for r in range(ROUNDS) if (r, np, c) in runs]
            n_ok = len(vals(np, c))
            note = f" ({n_ok}/{ROUNDS} rounds)" if n_ok < ROUNDS else ""
            print(f"  {c:<15} {fmt(m):>9} {'[' + fmt(lo) + ' – ' + fmt(hi) + ']':>21} "
                  f"{fmt(med(np, c, 'skew_med_us')):>9} {fmt(med(np, c, 'skew_p99_us')):>9}  "
                  f"{placement_summary(places)}{note}")
    if MPICH:
        its = ", ".join(f"{n} ranks {i}/{w}/{m}" for n, (i, w, m) in sorted(MPICH_ITERS.items()))
        print(f"\n  MPICH: iterations/warm-up/sample {its}, {MPICH_TIMEOUT:.0f} s limit per launch; it "
              f"busy-polls, so oversubscribed it waits for the scheduler's time slice.")
    print(f"  one sched_yield hand-off between two processes on one core: median {st.median(HANDOFF):.2f} µs "
          f"over {len(HANDOFF)} runs" if HANDOFF else "")

    print("\nPersistent barrier (MPI_Barrier_init) against MPI_Barrier, same launch, 20 interleaved blocks;")
    print("persistent/blocking: median [min–max] over rounds:")
    print(f"  {'ranks':>5} {'config':<15} {'blocking':>9} {'persistent':>10} {'pers/block':>10} {'[min – max]':>15}")
    pratio = {}
    for np in NPS:
        for c in PERSISTENT:
            rs = [pers[(r, np, c)] for r in range(ROUNDS) if (r, np, c) in pers]
            if not rs:
                continue
            q = [x["ratio"] for x in rs]
            pratio[(np, c)] = st.median(q)
            print(f"  {np:>5} {c:<15} {fmt(st.median(x['blocking_us'] for x in rs)):>9} "
                  f"{fmt(st.median(x['persistent_us'] for x in rs)):>10} {pratio[(np, c)]:>10.2f} "
                  f"{'[%.2f – %.2f]' % (min(q), max(q)):>15}")

    print("\nRatios (median over rounds of the per-round ratio; best = the fastest of toggle, counter and line by median):")
    best = {}
    for np in NPS:
        cand = [c for c in HW if (np, c) in stats]
        if not cand:
            continue
        best[np] = min(cand, key=lambda c: stats[(np, c)][0])
        parts = [f"{best[np]}/{s} {ratio(np, best[np], s):.2f}" for s in peers + ["floor"]
                 if ratio(np, best[np], s) is not None]
        print(f"  np={np}: " + ", ".join(parts))
        print(f"         hwbarr:auto/{best[np]} {fmt(ratio(np, 'hwbarr:auto', best[np]))}")

    print("\nTargets (issue 20), read from this run:")
    for np in NPS:
        if np not in best:
            continue
        b = best[np]
        verdict(f"{np} ranks: hwbarr best ({b}) ≤ {1.3 if np == 2 else 1.1}× floor", ratio(np, b, "floor"),
                1.3 if np == 2 else 1.1)
        if np > NCPUS:
            # Unbound, the kernel lays the processes over the cpus at launch
            # and a short run keeps that layout: the cpu with more of them
            # switches more per barrier. The per-round ratio by the layouts
            # of both launches (hwbarr's / the floor's).
            by = {}
            for r in range(ROUNDS):
                if (r, np, b) in runs and (r, np, "floor") in runs:
                    hw, fl = runs[(r, np, b)], runs[(r, np, "floor")]
                    k = f"{placement_layout(hw.get('placement', ''))}/{placement_layout(fl.get('placement', ''))}"
                    by.setdefault(k, []).append(hw["avg_us"] / fl["avg_us"])
            if by:
                parts = [f"{k} {st.median(v):.2f}× ({len(v)})" for k, v in sorted(by.items(), key=lambda kv: -len(kv[1]))]
                print(f"         by layout at start, {b}/floor: " + ", ".join(parts))
        if np == 2:
            # Against the fastest peer of each round (its best case).
            v = []
            for r in range(ROUNDS):
                ps = [runs[(r, np, s)]["avg_us"] for s in peers if (r, np, s) in runs]
                if (r, np, b) in runs and ps:
                    v.append(runs[(r, np, b)]["avg_us"] / min(ps))
            bp = min((s for s in peers if (np, s) in stats), key=lambda s: stats[(np, s)][0], default="?")
            verdict(f"2 ranks: hwbarr best ({b}) ≤ 0.5× best peer (per round; by median: {bp})",
                    st.median(v) if v else None, 0.5)
        else:
            rs = [(ratio(np, b, s), s) for s in peers if ratio(np, b, s) is not None]
            if rs:
                r, s = max(rs)
                verdict(f"{np} ranks: hwbarr best ({b}) ahead of every peer (closest: {s})", r, 1.0, strict=True)
    for np in NPS:
        verdict(f"{np} ranks: persistent ≤ 1.0× blocking (hwbarr:auto)", pratio.get((np, "hwbarr:auto")), 1.0)
    chart(stats, configs)
    print(f"results: {os.path.relpath(OUT, ROOT)}/barrier.csv, persistent.csv")


def load_section():
    """2 ranks that share one core (`taskset -c 0`: all that another job,
    a daemon or a pinning launcher leaves them) while each believes it has
    a core of its own (2 ranks, 2 cores: the spinning policy). hwbarr
    (auto) and tuned, interleaved launches, µs per barrier."""
    res = {}
    for i in range(LOAD_LAUNCHES):
        for c in ("hwbarr:auto", "tuned"):
            _, args = dict(CONFIGS)[c]
            r = parse_osu(mpirun(2, args, [osu_prog(), "2000", "200", "100"], timeout=120, wrap=("taskset", "-c", "0")))
            res.setdefault(c, []).append(r["avg_us"])
            print(f"\r  load launch {i + 1}/{LOAD_LAUNCHES} {c:<12} {r['avg_us']:10.1f} us   ", end="", flush=True)
    print(f"\n\n2 ranks confined to one core, each believing it has its own, {LOAD_LAUNCHES} launches "
          f"(µs per barrier; a scheduler slice is a few ms):")
    for c, v in res.items():
        print(f"  {c:<12} median {st.median(v):10.1f}  [{min(v):.1f}–{max(v):.1f}]")
    print(f"  hwbarr:auto/tuned (medians): {st.median(res['hwbarr:auto']) / st.median(res['tuned']):.3f}")


PROGRESS_LAUNCHES = int(os.environ.get("PROGRESS_LAUNCHES", "3"))


def progress_section():
    """Does a rank waiting in MPI_Barrier serve its peers' traffic
    (barrier_osu progress: rank 0 puts and flushes on rank 1's window, then
    sends 64 KiB messages to it, while rank 1 waits in MPI_Barrier)?
    hwbarr (auto) and tuned, interleaved launches, µs per operation."""
    res = {}
    for i in range(PROGRESS_LAUNCHES):
        for np in (2, 4):
            for c in ("hwbarr:auto", "tuned"):
                _, args = dict(CONFIGS)[c]
                r = parse_osu(mpirun(np, args, [osu_prog(), "progress", "100"], timeout=120))
                res.setdefault((np, c), []).append((r.get("rma_us"), r.get("p2p_us")))
                print(f"\r  progress launch {i + 1}/{PROGRESS_LAUNCHES} {np} ranks {c:<12}   ", end="", flush=True)
    print(f"\n\nWhile the target waits in MPI_Barrier, {PROGRESS_LAUNCHES} launches, µs per operation, "
          "median [min–max] (4 ranks oversubscribe the cores):")
    for np in (2, 4):
        for k, what in ((0, "put 4 B + flush"), (1, "send 64 KiB")):
            line = []
            med = {}
            for c in ("hwbarr:auto", "tuned"):
                v = [x[k] for x in res[(np, c)] if x[k] is not None]
                if not v:
                    line.append(f"{c} failed")
                    continue
                med[c] = st.median(v)
                line.append(f"{c} {med[c]:.2f} [{min(v):.2f}–{max(v):.2f}]")
            ratio = f"  hwbarr/tuned {med['hwbarr:auto'] / med['tuned']:.2f}" if len(med) == 2 and med["tuned"] else ""
            print(f"  {np} ranks, {what:<15}: " + ", ".join(line) + ratio)


HELP_LAUNCHES = int(os.environ.get("HELP_LAUNCHES", "3"))
HELP_ROUNDS = 400


def help_section():
    """A non-blocking barrier whose other ranks compute without MPI calls
    (barrier_check absent: every rank starts an MPI_Ibarrier or persistent
    barrier, one waits in MPI_Wait, the others spin until it is done): the
    waiting rank's start-to-completion time. polled's waiter must read for
    a computing leader (wait::HelpPace); toggle's last arrival releases.
    2 ranks bound apart, 4 ranks unbound (oversubscribed), both on a
    synthetic topology of one L3 domain per 2 cores."""
    prog = os.path.join(TARGET, "release/examples/barrier_check")
    cases = [(2, "package:1 l3:1 core:2", True), (4, "package:1 l3:2 core:2", False)]
    res = {}
    for i in range(HELP_LAUNCHES):
        for np, topo, bind in cases:
            for alg in ("polled", "toggle"):
                board = os.path.join(OUT, "help-board")
                open(board, "w").close()
                env = dict(ENV, HWBARR_BOARD=board, OMPI_MCA_coll_hwbarr_topology=topo)
                args = ["--mca", "coll_hwbarr_algorithm", alg, "-x", "HWBARR_BOARD",
                        "-x", "OMPI_MCA_coll_hwbarr_topology"]
                try:
                    out = mpirun(np, args, [prog, "absent", str(HELP_ROUNDS)], env=env, timeout=120, bind=bind)
                except (Timeout, RuntimeError) as e:
                    out = ""
                    print(f"\n  {np} ranks {alg}: launch failed: {str(e).splitlines()[0]}")
                finally:
                    os.remove(board)
                meds = [float(x) for x in re.findall(r"start to completion ([\d.]+) us median", out)]
                if len(meds) != np:
                    # A rank whose round stayed incomplete prints no OK line.
                    res.setdefault((np, alg, "failed"), []).append(i)
                    continue
                # The slowest rank's median: the rank that waits for helped leaders.
                res.setdefault((np, alg), []).append(max(meds))
                print(f"\r  help launch {i + 1}/{HELP_LAUNCHES} {np} ranks {alg:<7}   ", end="", flush=True)
    print(f"\n\nA non-blocking barrier whose other ranks compute, {HELP_LAUNCHES} launches of {HELP_ROUNDS} rounds: "
          "the waiting rank's start-to-completion time (the slowest rank's median per launch, µs), "
          "median [min–max] over launches:")
    for np, _, bind in cases:
        line = [f"{alg} {st.median(v):.2f} [{min(v):.2f}–{max(v):.2f}]" if (v := res.get((np, alg))) else f"{alg} –"
                for alg in ("polled", "toggle")]
        line += [f"{alg}: {len(f)} launches failed or incomplete"
                 for alg in ("polled", "toggle") if (f := res.get((np, alg, "failed")))]
        print(f"  {np} ranks ({'bound' if bind else 'unbound, oversubscribed'}): " + ", ".join(line))


PACE_LAUNCHES = int(os.environ.get("PACE_LAUNCHES", "6"))
# Timed iterations of each loop per launch, in 20 rounds: 20,000 a round at
# 2 ranks; oversubscribed about 20 ms a round of hwbarr's barrier, many
# scheduler slices.
PACE_ITERS = {2: 400000, 4: 200000, 8: 80000}
PACE_SLOW = 1.15  # a rank runs slowed when its MPI_COMM_SELF barrier takes this much over the fastest of its MPI


def pace_names(np):
    """The configurations of the pace section at `np` ranks. With more ranks
    than cpus sm and MPICH are left out: their barriers take 0.1-16 ms there
    (the barrier section measures them), 20 rounds of them would take hours."""
    if np > NCPUS:
        return ["hwbarr:auto", "tuned"] + (["xhc", "acoll"] if OMPI6 else [])
    return ["hwbarr:auto", "tuned"] + (["xhc", "acoll"] if OMPI6 else ["sm"]) + (["mpich"] if MPICH else [])


def pace_section():
    """The barrier against the floor in the same launch (barrier_osu pace):
    per launch, 20 rounds of MPI_Barrier, the floor's line protocol on an
    MPI shared window (waiting by sched_yield when ranks outnumber cpus) and
    each rank's MPI_Barrier(MPI_COMM_SELF), in the same bound processes, at
    2 ranks and at each oversubscribed count of NPS. A round counts as
    slowed when a rank's MPI_COMM_SELF barrier took over PACE_SLOW× the
    fastest of any launch of the same MPI and rank count: its cpu ran code
    slower just then. Every Open MPI configuration takes the same
    MPI_COMM_SELF path (coll/self), so one configuration slowed throughout
    still shows as slowed beside the others; a run slowed throughout does
    not. Prints, per rank count and configuration, the median barrier/floor
    ratio of the rounds at full pace and of the slowed ones, and reads the
    targets against the floor of the same round: the floor's launches of
    the barrier section start their processes apart, where the scheduler
    places them anew, and spread as much as the configurations compared."""
    if NCPUS < 2:
        print("\npace: needs 2 cpus, left out")
        return
    nps = [np for np in NPS if np == 2 or np > NCPUS]
    if not nps:
        print(f"\npace: runs at 2 ranks and at rank counts above the {NCPUS} cpus; NPS has neither, left out")
        return
    if 2 in nps:
        mpich_setup()
    order = [(np, c) for np in nps for _ in range(PACE_LAUNCHES) for c in pace_names(np)]
    random.Random(SEED).shuffle(order)
    rows = []
    for i, (np, c) in enumerate(order):
        kind, args = dict(CONFIGS)[c]
        iters = PACE_ITERS.get(np, PACE_ITERS[8])
        prog = ["pace", str(iters), str(iters // 20)]
        try:
            out = mpiexec(np, prog, bind=True) if kind == "mpich" else mpirun(np, args, [osu_prog()] + prog, bind=True)
        except (Timeout, RuntimeError) as e:
            print(f"\n  pace {np} ranks {c}: {str(e).splitlines()[0]}")
            continue
        place = re.search(r"placement=(\S+)", out)
        found = re.findall(r"round=(\d+) barrier_ns=([\d.]+) floor_ns=([\d.]+) self_ns=([\d.,]+)", out)
        if not found:
            print(f"\n  pace {np} ranks {c}: no rounds in its output")
        for rnd, b, fl, sf in found:
            rows.append([i, np, c, int(rnd), float(b), float(fl), [float(x) for x in sf.split(",")],
                         place.group(1) if place else ""])
        print(f"\r  pace launch {i + 1}/{len(order)} {np} ranks {c:<12}", end="", flush=True)
    print()
    with open(os.path.join(OUT, "pace.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["launch", "ranks", "config", "round", "barrier_ns", "floor_ns", "self_ns", "placement"])
        w.writerows(r[:6] + [",".join(f"{x:.2f}" for x in r[6])] + r[7:] for r in rows)
    print(f"\nPace, ranks bound (rank i to cpu i mod {NCPUS}), {PACE_LAUNCHES} launches × 20 rounds each per "
          f"configuration (ns per barrier; ratio to the floor measured in the same round by the same processes; "
          f"with more ranks than cpus the floor's waiters yield after each look; a round is slowed when a rank's "
          f"MPI_COMM_SELF barrier took over {PACE_SLOW}× the fastest of any launch of the same MPI and rank count, shown as self ns; "
          f"oversubscribed, where ranks share cpus, every round counts as full pace):")

    def mpi_of(c):
        return dict(CONFIGS)[c][0] == "mpich"
    ratio = {}
    for np in nps:
        print(f"  {np} ranks{' (oversubscribed)' if np > NCPUS else ''}")
        print(f"  {'config':<12} {'self ns':>8}  {'full pace: rounds':>17} {'barrier':>8} {'ratio':>6}   "
              f"{'slowed: rounds':>14} {'barrier':>8} {'ratio':>6}")
        for c in pace_names(np):
            mine = [r for r in rows if r[1] == np and r[2] == c]
            if not mine:
                continue
            if np > NCPUS:
                # Ranks that share a cpu interrupt each other's
                # MPI_COMM_SELF loops: no reading of a cpu's pace there.
                full, slowed, pace = mine, [], f"{'–':>8}"
            else:
                fastest = min(min(r[6]) for r in rows if r[1] == np and mpi_of(r[2]) == mpi_of(c))
                full = [r for r in mine if max(r[6]) <= PACE_SLOW * fastest]
                slowed = [r for r in mine if max(r[6]) > PACE_SLOW * fastest]
                pace = f"{fastest:8.2f}"

            def cell(g, width):
                if not g:
                    return f"{0:>{width}} {'–':>8} {'–':>6}"
                return f"{len(g):>{width}} {st.median(r[4] for r in g):8.1f} {st.median(r[4] / r[5] for r in g):6.2f}"
            print(f"  {c:<12} {pace}  {cell(full, 17)}   {cell(slowed, 14)}")
            ratio[(np, c)] = st.median(r[4] / r[5] for r in mine)
    # The targets against the floor of the same round (the barrier section
    # reads them against floor launches of their own).
    print("Targets, against the floor of the same round (median of per-round ratios, all rounds):")
    for np in nps:
        if (np, "hwbarr:auto") not in ratio:
            continue
        mine = ratio[(np, "hwbarr:auto")]
        peers = {c: ratio[(np, c)] for c in pace_names(np) if c != "hwbarr:auto" and (np, c) in ratio}
        verdict(f"{np} ranks: hwbarr:auto ≤ {1.3 if np == 2 else 1.1}× the floor", mine, 1.3 if np == 2 else 1.1)
        if peers:
            best = min(peers, key=peers.get)
            if np == 2:
                verdict(f"2 ranks: hwbarr:auto ≤ 0.5× the best peer ({best})", mine / peers[best], 0.5)
            else:
                verdict(f"{np} ranks: hwbarr:auto ahead of every peer here (closest: {best})", mine / peers[best], 1.0,
                        strict=True)
    print(f"results: {os.path.relpath(OUT, ROOT)}/pace.csv")


def threads_section():
    """MPI_THREAD_MULTIPLE, 2 ranks, 4 threads each on its own dup of
    MPI_COMM_WORLD (examples/threads_bench): hwbarr's median per barrier
    over launches, unbound and with each pair's two threads bound to one
    core; on 5.0 and 6.0 compared with 4.1's figure from its last make bench
    (build/bench/threads.csv), if there is one."""
    prog = os.path.join(TARGET, "release/examples/threads_bench")
    args = ["--mca", "coll", "hwbarr,tuned," + REST]
    rows, res = [], {}
    for i in range(THREADS_LAUNCHES):
        for pin in ("none", "same"):
            env = dict(ENV)
            if pin != "none":
                env["THREADS_BENCH_PIN"] = pin
            out = mpirun(2, args + ["-x", "THREADS_BENCH_PIN"] if pin != "none" else args,
                         [prog, "4", "200000"], env=env, timeout=600)
            kv = dict(re.findall(r"(\w+)=([\d.]+)", out))
            v = float(kv["per_barrier_us"])
            res.setdefault(pin, []).append(v)
            rows.append([i, pin, v, kv.get("wall_us", "")])
            print(f"\r  threads launch {i + 1}/{THREADS_LAUNCHES} pin={pin:<4} {v:10.3f} us   ", end="", flush=True)
    print()
    with open(os.path.join(OUT, "threads.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["launch", "pin", "per_barrier_us", "wall_us"])
        w.writerows(rows)
    print(f"\nMPI_THREAD_MULTIPLE, 2 ranks x 4 threads, hwbarr, {THREADS_LAUNCHES} launches (µs per barrier):")
    for pin in ("none", "same"):
        v = res[pin]
        print(f"  threads {'unbound' if pin == 'none' else 'pair on one core':<17} median {st.median(v):8.3f}"
              f"  [{min(v):.3f}–{max(v):.3f}]")
    ref = os.path.join(ROOT, "build", "bench", "threads.csv")
    if OMPI[:2] == (4, 1):
        print("  (the 4.1 figure the other lines are compared with: " + os.path.relpath(ref, ROOT) + ")")
    elif os.path.exists(ref):
        with open(ref) as f:
            base = list(csv.DictReader(f))
        for pin, what in (("none", "unbound"), ("same", "each pair on one core")):
            b = [float(r["per_barrier_us"]) for r in base if r["pin"] == pin]
            verdict(f"MPI_THREAD_MULTIPLE: hwbarr on {OMPI_LABEL} ≤ 1.5× its 4.1 figure ({what}, medians)",
                    st.median(res[pin]) / st.median(b) if b else None, 1.5)
    else:
        print("  (no 4.1 figure on record: run make bench on 4.1 first)")


def main():
    os.makedirs(OUT, exist_ok=True)
    if "barrier" in SECTIONS:
        barrier_section()
    if "threads" in SECTIONS:
        threads_section()
    if "load" in SECTIONS:
        load_section()
    if "progress" in SECTIONS:
        progress_section()
    if "pace" in SECTIONS:
        pace_section()
    if "help" in SECTIONS:
        help_section()
    if "ibarrier" in SECTIONS:
        ibarrier_bench()
    if "fakenodes" in SECTIONS:
        measured = fake_nodes_bench()
        scale_model(measured)
    if "init" in SECTIONS:
        with_hw, without = init_cost()
        w, wo = st.median(with_hw), st.median(without)
        # The launches' own spread, beside the ratio: a launch's time varies
        # by more than the 2% checked, so few launches cannot resolve it.
        def quartiles(v):
            q = st.quantiles(v, n=4, method="inclusive") if len(v) > 1 else v * 3
            return f"{q[0] / 1000:.1f} to {q[2] / 1000:.1f}"
        print(f"\nMPI_Init+MPI_Finalize, 2 ranks, median of {INIT_LAUNCHES} interleaved launches each: "
              f"with hwbarr {w / 1000:.1f} ms (quartiles {quartiles(with_hw)}), "
              f"without {wo / 1000:.1f} ms ({quartiles(without)}), ratio {w / wo:.3f} "
              f"({'MET' if w / wo <= 1.02 else 'MISS'} ≤ 1.02)")
        print(f"results: {os.path.relpath(OUT, ROOT)}/init.csv")


if __name__ == "__main__":
    sys.exit(main())
