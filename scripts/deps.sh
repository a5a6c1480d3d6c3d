#!/usr/bin/env bash
# Makes sure the build prerequisites are here: Open MPI (Debian's 4.1, or
# the one at OMPI_PREFIX) with its component headers, and libclang for
# bindgen. Installs the Debian packages when run as root on Debian;
# otherwise names what to install.
set -euo pipefail

have_ompi() { command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
  for d in $(mpicc --showme:incdirs 2>/dev/null); do [ -f "$d/ompi/mca/coll/coll.h" ] && return 0; done; return 1; }
# libclang's C library, the one bindgen loads (libclang.so, libclang-14.so.1),
# not libclang-cpp, the C++ one, which other packages bring alone; and
# clang's own headers (stddef.h), without which bindgen stops on the
# first system header (libclang1-14 does not bring them; libclang-dev does).
have_clang() { ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1 &&
  ls /usr/lib/llvm-*/lib/clang/*/include/stddef.h >/dev/null 2>&1; }

# `deps.sh bench` also wants gnuplot for the chart, python3 for the driver
# and python3's venv for MPICH (below); `deps.sh lint` python3 for the
# layering check (scripts/layers.py); `deps.sh test` that, Lmod, whose
# module command the module file test loads hwbarr with, and hwloc's
# headers, with which a test writes the XML machines it gives Open MPI.
want=${1:-}
have_python() { command -v python3 >/dev/null; }
have_lmod() { [ -f /usr/share/lmod/lmod/init/bash ]; }
have_hwloc() { echo '#include <hwloc.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
have_plot() { command -v gnuplot >/dev/null; }
have_venv() { have_python && python3 -c 'import ensurepip' 2>/dev/null; }
have_extra() {
  case "$want" in
    bench) have_plot && have_venv ;;
    lint) have_python ;;
    test) have_python && have_lmod && have_hwloc ;;
    *) true ;;
  esac
}

# `deps.sh bench` also puts MPICH beside Open MPI: the PyPI wheel `mpich`
# (mpicc, hydra's mpiexec, libmpi) in a venv of its own, MPICH_VENV
# (build/mpich-venv). Never fatal: without PyPI, make bench runs without
# MPICH and says so. MPICH_PIP_SPEC picks the version (default the one the
# figures in docs/benchmarks.md were taken with); NO_MPICH=1 skips it.
mpich_venv() {
  local venv=${MPICH_VENV:-$(cd "$(dirname "$0")/.." && pwd)/build/mpich-venv}
  local spec=${MPICH_PIP_SPEC:-mpich==5.0.2}
  [ -n "${NO_MPICH:-}" ] && return 0
  [ -x "$venv/bin/mpiexec" ] && [ -x "$venv/bin/mpicc" ] && return 0
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "hwbarr: python3 -m venv failed (Debian: apt-get install python3-venv): make bench runs without MPICH" >&2
    return 0
  fi
  echo "hwbarr: pip install $spec into $venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check --timeout 20 --retries 1 "$spec" >/dev/null 2>&1 ||
    [ ! -x "$venv/bin/mpiexec" ]; then
    echo "hwbarr: pip install $spec failed (PyPI unreachable?): make bench runs without MPICH" >&2
  fi
  return 0
}
ok() { if [ "$want" = bench ]; then mpich_venv; fi; exit 0; }

# With OMPI_PREFIX the user named an Open MPI: never install Debian's 4.1
# for it, only check that prefix and say what it lacks.
if [ -n "${OMPI_PREFIX:-}" ]; then
  export PATH="$OMPI_PREFIX/bin:$PATH"
  if [ ! -x "$OMPI_PREFIX/bin/mpicc" ]; then
    echo "hwbarr: OMPI_PREFIX=$OMPI_PREFIX holds no Open MPI (no bin/mpicc): give the prefix it was installed into (scripts/build-ompi.sh TARBALL PREFIX builds one)" >&2
    exit 1
  fi
  if ! have_ompi; then
    v=$("$OMPI_PREFIX/bin/mpicc" --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9][0-9.a-z]*\).*/\1/p')
    echo "hwbarr: the Open MPI ${v:+$v }at $OMPI_PREFIX has no component headers (ompi/mca/coll/coll.h): rebuild it with configure --with-devel-headers, or with scripts/build-ompi.sh TARBALL $OMPI_PREFIX (which also adds the headers --with-devel-headers forgets)" >&2
    exit 1
  fi
fi
if have_ompi && have_clang && have_extra; then ok; fi

# Only what is missing: an Open MPI or libclang that passed its check is
# not installed again.
pkgs=""
have_ompi || pkgs="$pkgs openmpi-bin libopenmpi-dev"
have_clang || pkgs="$pkgs libclang-dev"
case "$want" in
  bench) have_plot || pkgs="$pkgs gnuplot-nox"; have_venv || pkgs="$pkgs python3 python3-venv" ;;
  lint) have_python || pkgs="$pkgs python3" ;;
  test) have_python || pkgs="$pkgs python3"; have_lmod || pkgs="$pkgs lmod"; have_hwloc || pkgs="$pkgs libhwloc-dev" ;;
esac
pkgs=${pkgs# }
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "hwbarr: installing $pkgs (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $pkgs >/dev/null
  have_ompi && have_clang && have_extra && ok
fi
have_ompi || echo "hwbarr: Open MPI with component headers not found: install openmpi-bin and libopenmpi-dev (Debian's 4.1), or set OMPI_PREFIX=<Open MPI install prefix>" >&2
have_clang || echo "hwbarr: libclang not found (bindgen needs it): install libclang-dev (Debian)" >&2
have_extra || case "$want" in
  bench) echo "hwbarr: make bench needs gnuplot, python3 and its venv module: install gnuplot-nox python3 python3-venv (Debian)" >&2 ;;
  lint) echo "hwbarr: make lint needs python3 (the layering check): install python3 (Debian)" >&2 ;;
  test) echo "hwbarr: make test needs python3 (the layering check), Lmod (the module file test) and hwloc's headers (the XML machines): install python3 lmod libhwloc-dev (Debian)" >&2 ;;
esac
exit 1
