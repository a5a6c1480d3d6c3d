#!/usr/bin/env bash
# Makes sure the build prerequisites are here: Open MPI 4.1 with its
# component headers, and libclang for bindgen. Installs the Debian packages
# when run as root on Debian; otherwise names what to install.
set -euo pipefail

have_ompi() { command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
  for d in $(mpicc --showme:incdirs 2>/dev/null); do [ -f "$d/ompi/mca/coll/coll.h" ] && return 0; done; return 1; }
have_clang() { ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; }

# `deps.sh bench` also wants gnuplot for the chart and python3 for the driver.
want_bench=${1:-}
have_bench() { [ -z "$want_bench" ] || { command -v gnuplot >/dev/null && command -v python3 >/dev/null; }; }

if [ -n "${OMPI_PREFIX:-}" ]; then export PATH="$OMPI_PREFIX/bin:$PATH"; fi
if have_ompi && have_clang && have_bench; then exit 0; fi

pkgs="openmpi-bin libopenmpi-dev libclang-dev"
[ -z "$want_bench" ] || pkgs="$pkgs gnuplot-nox python3"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "hwbarr: installing $pkgs (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $pkgs >/dev/null
  have_ompi && have_clang && have_bench && exit 0
fi
have_ompi || echo "hwbarr: Open MPI 4.1 with component headers not found: install openmpi-bin and libopenmpi-dev (Debian), or set OMPI_PREFIX=<Open MPI install prefix>" >&2
have_clang || echo "hwbarr: libclang not found (bindgen needs it): install libclang-dev (Debian)" >&2
have_bench || echo "hwbarr: make bench needs gnuplot and python3: install gnuplot-nox python3 (Debian)" >&2
exit 1
