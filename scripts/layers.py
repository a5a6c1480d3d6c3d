#!/usr/bin/env python3
"""The module graph of src/ and the layer rules it must keep (make lint).

A node is a top-level module (`comm`, `engine`, ...) or, inside the folders
that group several concerns, a submodule (`ompi::ffi`, `p2p::pml`,
`shm::segment`, `core::counter`). An edge A -> B means a `crate::B...` path
appears in A's files (in `use` lines or inline). Rules:

1. no cycles between nodes;
2. the cores and the shared-memory layer (`core::*`, `sync`, `shm::*`) and
   the plain logic (`settings`, `exchange::words`, `wait`, `pause`, `contention`, `topology`,
   `layout`) reach nothing of
   Open MPI (`ompi::*`, `p2p::pml`);
3. `ompi::{component, module, pvar}` (Open MPI's entry points) are imported
   by nothing outside `ompi`;
4. the protocols and a communicator's state and queue (`barrier::*`,
   `exchange::*`, `layout`, `comm`, `engine`, `p2p` but `p2p::pml`) reach of
   Open MPI only its messages (`ompi::report`), so they run over the
   in-memory transport in unit tests;
5. `unsafe` code lives only in `ompi::*`, `shm::*` and `p2p::pml`.

`scripts/layers.py` checks and prints the layers, bottom up (each node
imports only nodes of lower layers); `--dot` prints the graph for graphviz.
Exit status 1 when a rule is broken.
"""
import os
import re
import sys

ROOT = os.environ.get("HWBARR_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
GROUPS = {"ompi", "p2p", "shm", "core", "barrier", "exchange"}  # folders whose submodules are nodes
PATH = re.compile(r"crate::((?:[a-z_0-9]+::)*[a-z_A-Z0-9]+)")
# Top-level `use super::...` only (a test module's `super` is its own file).
SUPER = re.compile(r"^use super::(\{|(?:[a-z_0-9]+::)*[a-z_A-Z0-9]+)", re.M)
USE_GROUP = re.compile(r"use crate::\{([^;]*)\};", re.S)
USE_SUBGROUP = re.compile(r"use crate::((?:[a-z_0-9]+::)+)\{([^;]*)\};", re.S)


def node_of_file(rel):
    parts = rel[:-3].split(os.sep)  # strip .rs
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"]:
        return None
    if parts[0] in GROUPS and len(parts) > 1:
        return "::".join(parts[:2])
    return parts[0]


def node_of_path(path, known):
    segs = path.split("::")
    if segs[0] in GROUPS and len(segs) > 1 and f"{segs[0]}::{segs[1]}" in known:
        return f"{segs[0]}::{segs[1]}"
    return segs[0] if segs[0] in known else None


UNSAFE = re.compile(r"\bunsafe\s*(\{|fn\b|impl\b|extern\b)")


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def sources():
    """Each node's files."""
    files = {}
    for d, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, n), ROOT)
                node = node_of_file(rel)
                if node:
                    files.setdefault(node, []).append(os.path.join(d, n))
    return files


def graph():
    files = sources()
    known = set(files) | {n.split("::")[0] for n in files}
    edges = {n: set() for n in files}
    for node, paths in files.items():
        for p in paths:
            text = open(p, encoding="utf-8").read()
            refs = PATH.findall(text)
            # `use crate::{a::b, c};` names several paths at once, and so
            # does `use crate::ompi::{ffi, report};`.
            for prefix, group in USE_SUBGROUP.findall(text):
                refs += [prefix + r.strip().split(" ")[0] for r in re.split(r",\s*(?![^{]*\})", group) if r.strip()]
            for group in USE_GROUP.findall(text):
                refs += [r.strip().split(" ")[0] for r in re.split(r",\s*(?![^{]*\})", group) if r.strip()]
            # In a group's submodule (`p2p/pml.rs`), `super::X` is the
            # group's own module or a sibling submodule.
            if "::" in node:
                group = node.split("::")[0]
                refs += [group if r == "{" else f"{group}::{r}" for r in SUPER.findall(text)]
            for r in refs:
                target = node_of_path(r.replace("{", "").strip(), known)
                if target and target != node and target in files:
                    edges[node].add(target)
                elif target and target != node and target in GROUPS:
                    # `crate::ompi::{ffi, report}` style: the group's parts.
                    for sub in re.findall(r"[a-z_0-9]+", r.split("::", 1)[1] if "::" in r else ""):
                        if f"{target}::{sub}" in files:
                            edges[node].add(f"{target}::{sub}")
    return edges


def cycles(edges):
    """Strongly connected components with more than one node."""
    index, low, stack, on, out, i = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = i[0]
        i[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def layers(edges):
    level = {}

    def depth(v, seen=()):
        if v in level:
            return level[v]
        if v in seen:
            return 0
        level[v] = 1 + max((depth(w, seen + (v,)) for w in edges[v]), default=-1)
        return level[v]

    for v in edges:
        depth(v)
    by = {}
    for v, l in level.items():
        by.setdefault(l, []).append(v)
    return [sorted(by[l]) for l in sorted(by)]


def self_test():
    """The checks must catch a cycle, Open MPI reached from a core, and an
    entry point imported from below: run on a small tree made here."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "core"))
        os.makedirs(os.path.join(d, "ompi"))
        files = {
            "lib.rs": "mod a; mod b; mod comm; mod core; mod ompi;",
            "a.rs": "use crate::b::X;",
            "b.rs": "use crate::a::Y;",
            "core/mod.rs": "pub mod counter;",
            "core/counter.rs": "use crate::ompi::ffi;",
            "ompi/mod.rs": "pub mod ffi; pub mod module; pub mod x; pub mod y; pub mod z;",
            "ompi/ffi.rs": "",
            "ompi/module.rs": "use super::ffi;",
            "ompi/x.rs": "use crate::ompi::{y, z};",
            "ompi/y.rs": "use crate::ompi::x::X;",
            "ompi/z.rs": "",
            "engine.rs": "use crate::ompi::module::state;",
            "comm.rs": "use crate::ompi::ffi::x; fn f() { unsafe { g() } }",
        }
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text + "\n")
        r = subprocess.run([sys.executable, __file__], env=dict(os.environ, HWBARR_SRC=d),
                           capture_output=True, text=True)
        want = ["import cycle: a <-> b", "import cycle: ompi::x <-> ompi::y", "core::counter must not reach Open MPI, but imports ompi::ffi",
                "engine imports Open MPI's entry point module ompi::module",
                "comm may reach only Open MPI's messages (ompi::report), but imports ompi::ffi",
                "comm has unsafe code"]
        missed = [w for w in want if w not in r.stderr]
        if r.returncode != 1 or missed:
            print(f"layers self-test: missed {missed} (exit {r.returncode}): {r.stderr}", file=sys.stderr)
            return 1
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    edges = graph()
    if "--dot" in sys.argv:
        print("digraph hwbarr {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    broken = []
    for c in cycles(edges):
        broken.append("import cycle: " + " <-> ".join(c))
    plain = [n for n in edges if n.split("::")[0] in ("core", "shm") or n in ("sync", "settings", "exchange::words", "wait", "pause", "contention", "topology", "layout")]
    openmpi = [n for n in edges if n.startswith("ompi") or n == "p2p::pml"]
    for n in plain:
        for m in sorted(edges[n]):
            if m in openmpi:
                broken.append(f"{n} must not reach Open MPI, but imports {m}")
    logic = [n for n in edges if n.split("::")[0] in ("barrier", "exchange", "layout", "comm", "engine", "p2p")
             and n != "p2p::pml" and n not in plain]
    for n in logic:
        for m in sorted(edges[n]):
            if m in openmpi and m != "ompi::report":
                broken.append(f"{n} may reach only Open MPI's messages (ompi::report), but imports {m}")
    for n, paths in sorted(sources().items()):
        if n.split("::")[0] in ("ompi", "shm") or n == "p2p::pml":
            continue
        for p in paths:
            if UNSAFE.search(strip_comments(open(p, encoding="utf-8").read())):
                broken.append(f"{n} has unsafe code (only ompi, shm and p2p::pml may)")
    entry = ("ompi::component", "ompi::module", "ompi::pvar")
    for n in edges:
        if not n.startswith("ompi"):
            for m in sorted(edges[n]):
                if m in entry:
                    broken.append(f"{n} imports Open MPI's entry point module {m}")
    print("module layers, bottom up (each imports only lower layers):")
    for k, layer in enumerate(layers(edges)):
        print(f"  {k}: " + "  ".join(layer))
    for b in broken:
        print("layers: " + b, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
