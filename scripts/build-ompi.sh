#!/usr/bin/env bash
# scripts/build-ompi.sh TARBALL PREFIX
#
# Builds an Open MPI 5.0.x or 6.0.x release tarball (openmpi-5.0.x.tar.bz2 /
# .gz / .xz, or the shared autogen'd trees) into PREFIX with its development headers, so
# that hwbarr can be built against it (OMPI_PREFIX=PREFIX). Idempotent: when
# PREFIX already holds that version (PREFIX/.hwbarr-built names it), it does
# nothing. As root on Debian it installs the build prerequisites itself.
#
# What it does beyond configure/make/install:
#   - configure with the devel headers and the external hwloc/libevent that
#     Debian ships, internal PMIx/PRRTE (Debian 12's PMIx is too old);
#   - copies the headers that --with-devel-headers forgets (the installed
#     internal headers include them) into PREFIX/include/openmpi: the same
#     six in 5.0.10 and 6.0.0a1.
set -euo pipefail

usage() { echo "usage: $0 TARBALL PREFIX   (Open MPI 5.0.x or 6.0.x release tarball)" >&2; exit 2; }
[ $# -eq 2 ] || usage
tarball=$(readlink -f "$1")
prefix=$2
[ -f "$tarball" ] || { echo "build-ompi: no such tarball: $1" >&2; exit 1; }
case "$prefix" in /*) ;; *) prefix=$PWD/$prefix ;; esac

# The version from the file name: openmpi-5.0.10.tar.bz2, openmpi-5.0.10-autogen.tar.xz.
base=$(basename "$tarball")
version=$(printf %s "$base" | sed -n 's/^openmpi-\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*[a-z0-9]*\).*/\1/p')
[ -n "$version" ] || { echo "build-ompi: cannot read an Open MPI version from '$base' (expected openmpi-X.Y.Z...)" >&2; exit 1; }
case "$version" in
  5.0.*|6.0.*) ;;
  *) echo "build-ompi: Open MPI $version: this script builds the 5.0 and 6.0 release lines (4.1 comes from Debian: apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1 ;;
esac

stamp="$prefix/.hwbarr-built"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ] && [ -x "$prefix/bin/mpicc" ] &&
   [ -f "$prefix/include/openmpi/ompi/mca/coll/coll.h" ]; then
  echo "build-ompi: $prefix already holds Open MPI $version"
  exit 0
fi

# Build prerequisites (Debian package names).
need="gcc make flex libhwloc-dev libevent-dev pkg-config bzip2 xz-utils"
missing=""
for p in $need; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "build-ompi: installing$missing (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $missing >/dev/null
  else
    echo "build-ompi: missing build prerequisites:$missing (Debian: apt-get install$missing)" >&2
    exit 1
  fi
fi

# Never wipe a directory this script did not fill.
if [ -d "$prefix" ] && [ -n "$(ls -A "$prefix")" ] && [ ! -f "$stamp" ]; then
  echo "build-ompi: $prefix exists, is not empty and was not built by this script: choose another PREFIX" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/hwbarr-ompi-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "build-ompi: Open MPI $version -> $prefix (log: $prefix.build.log)"
mkdir -p "$(dirname "$prefix")"
log="$prefix.build.log"
: > "$log"
t0=$(date +%s)
tar -xf "$tarball" -C "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
[ -x "$src/configure" ] || { echo "build-ompi: $base has no configure script at its top" >&2; exit 1; }

jobs=$(nproc 2>/dev/null || echo 2)
(
  cd "$src"
  ./configure --prefix="$prefix" --with-devel-headers --disable-mpi-fortran --disable-oshmem \
    --with-pmix=internal --with-prrte=internal --with-hwloc=external --with-libevent=external
  make -j"$jobs"
  if [ -f "$stamp" ]; then rm -rf "$prefix"; fi
  make install
) >>"$log" 2>&1 || { echo "build-ompi: build failed; last lines of $log:" >&2; tail -30 "$log" >&2; exit 1; }

# Headers that --with-devel-headers does not install although the installed
# internal headers include them (5.0.10 and 6.0.0a1 alike; one that is
# present is left alone).
for rel in opal/mca/threads/pthreads/threads_pthreads.h \
           opal/mca/threads/pthreads/threads_pthreads_mutex.h \
           opal/mca/threads/pthreads/threads_pthreads_threads.h \
           opal/mca/threads/pthreads/threads_pthreads_tsd.h \
           opal/mca/timer/linux/timer_linux.h \
           ompi/mpi/fortran/base/fint_2_int.h; do
  dst="$prefix/include/openmpi/$rel"
  if [ ! -f "$dst" ] && [ -f "$src/$rel" ]; then
    install -D -m 0644 "$src/$rel" "$dst"
  fi
done

echo "$version" > "$stamp"
echo "build-ompi: done in $(( $(date +%s) - t0 )) s"
