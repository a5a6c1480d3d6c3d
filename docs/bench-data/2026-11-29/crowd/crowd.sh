#!/bin/bash
# crowd.sh <4.1.4|5.0.10|6.0.0a1> <blocking|persistent> <rounds> <dirA> <dirB>: 2 ranks, the
# components in dirA and dirB launched in shuffled order per round, verbosity 2; unbound, or as
# $BIND says (e.g. BIND=core), under $TASKSET's CPU list if set. One line per launch: build,
# "found" (a rank kept the finding that its core is shared), "moved" (a rank moved its thread), or
# "no"; then barrier_osu's figures and the placement (rank:cpu at start>at end).
v=$1; mode=$2; rounds=$3; A=$4; B=$5
if [ $v = 4.1.4 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
else pre=${OMPI_CACHE:-<cache>}/openmpi-$v; ompi=$pre/lib/openmpi; fi
prog=${CHECKOUT:-<checkout>}/build/barrier_osu/ompi-$v
iters=20000; [ $mode = persistent ] && iters="1000000 1000"
ts=; [ -n "$TASKSET" ] && ts="taskset -c $TASKSET"
for r in $(seq $rounds); do for d in $(printf "$A\n$B\n" | shuf); do
  out=$(PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib $ts timeout 120 mpirun --allow-run-as-root -np 2 --bind-to ${BIND:-none} --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 2 $prog $mode $iters 2>&1)
  f=no; echo "$out" | grep -q "moved a waiting thread" && f=moved; echo "$out" | grep -q "hand its core" && f=found
  y=$(echo "$out" | grep -o "gave the core up [0-9]* times" | grep -o "[0-9]*" | paste -sd+ | bc)
  echo "$(basename $d) $f yields=${y:-0} $(echo "$out" | grep "^ranks=" | grep -o " avg_us=[0-9.]*\| blocking_us=[0-9.]*\| persistent_us=[0-9.]*\| ratio_med=[0-9.]*\| placement=[^ ]*" | tr -d '\n')"
done; done
