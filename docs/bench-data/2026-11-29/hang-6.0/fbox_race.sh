#!/bin/bash
# fbox_race.sh <Open MPI prefix> <launches> [mpirun args...]: builds fbox_race.c with that Open
# MPI's mpicc and launches it (2 ranks, 4 threads x 2000 round trips); counts the launches
# its watchdog called stuck.
set -u
pre=$1; n=$2; shift 2
export PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
mpicc -O2 -o "$tmp/fbox_race" "$here/fbox_race.c" -lpthread
stuck=0; ok=0; other=0
for i in $(seq 1 "$n"); do
  timeout 120 mpirun --allow-run-as-root --map-by :OVERSUBSCRIBE --bind-to none -np 2 "$@" \
    "$tmp/fbox_race" 4 2000 > "$tmp/out" 2>&1
  rc=$?
  if grep -q STUCK "$tmp/out"; then stuck=$((stuck + 1)); echo "launch $i: $(grep -h STUCK "$tmp/out" | tr '\n' ' ')"
  elif [ $rc -eq 0 ]; then ok=$((ok + 1))
  else other=$((other + 1)); echo "launch $i: exit $rc"; fi
done
rm -rf "$tmp"
echo "$stuck stuck, $other other failures, $ok finished, of $n launches"
