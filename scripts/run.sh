#!/usr/bin/env bash
# `make run`: hwbarr against the stock barrier, side by side, with a small
# OSU-style barrier program (examples/barrier_bench.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
COMPONENT_DIR=${COMPONENT_DIR:-$PWD/build/components}
. scripts/common.sh
BENCH=${HWBARR_TARGET_DIR:-target}/release/examples/barrier_bench
ITERS=${ITERS:-20000}

measure() { # np, label, mpirun args... -> avg µs
  local np=$1 label=$2; shift 2
  local line
  line=$(hw_mpirun "$np" "$@" "$BENCH" "$ITERS" 2>&1 | grep '^ranks=' || true)
  [ -n "$line" ] || { echo "  $label: job failed" >&2; echo "-"; return; }
  echo "$line" | sed 's/.*avg_us=\([^ ]*\).*/\1/'
}

echo "hwbarr: MPI_Barrier latency, average over ranks in µs (OSU method, $ITERS iterations)"
printf "%-6s %-12s %-12s %-12s %-12s %-14s\n" ranks "hwbarr:auto" "hwbarr:toggle" "hwbarr:counter" "stock" "auto/stock"
for np in 2 4 8; do
  a=$(measure "$np" auto)
  t=$(measure "$np" toggle --mca coll_hwbarr_algorithm toggle)
  c=$(measure "$np" counter --mca coll_hwbarr_algorithm counter)
  s=$(measure "$np" stock --mca coll '^hwbarr')
  r=$(awk -v a="$a" -v s="$s" 'BEGIN { if (a+0 > 0 && s+0 > 0) printf "%.2f", a/s; else print "-" }')
  printf "%-6s %-12s %-12s %-12s %-12s %-14s\n" "$np" "$a" "$t" "$c" "$s" "$r"
done
echo "(stock: Open MPI's own selection without hwbarr: coll/tuned on 4.1 and 6.0, coll/han on 5.0; 4 and 8 ranks oversubscribe this machine's $(nproc) cores)"
hw_mpirun 2 --mca coll_hwbarr_verbose 1 "$BENCH" 100 2>&1 | grep 'coll:hwbarr' | head -1
