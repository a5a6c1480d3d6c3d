#!/bin/bash
# persistent/blocking, oversubscribed, rank i on cpu i mod 2; modes auto (sleep) and idle yield.
# usage: persistent-idle-ab.sh <launches> <iters> versions...
L=$1; IT=$2; shift 2
for v in "$@"; do
  if [ $v = 4.1.4 ]; then run=mpirun; od=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3;
  else pre=$HOME/.cache/hwbarr/openmpi-$v; run=$pre/bin/mpirun; od=$pre/lib/openmpi; fi
  C=${HWBARR_DIR:-build/components}-$v   # hwbarr installed for Open MPI $v
  for np in 4 8; do
    for i in $(seq $L); do
      for mode in auto yield; do
        extra=(); [ $mode != auto ] && extra=(--mca coll_hwbarr_idle $mode)
        out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 $run -np $np --oversubscribe --bind-to none \
          --mca mca_base_component_path $od:$C "${extra[@]}" \
          bash -c "exec taskset -c \$((OMPI_COMM_WORLD_RANK % 2)) build/barrier_osu/ompi-$v persistent $IT $((IT/20))" 2>&1 | grep ranks=)
        echo "$v np=$np launch=$i mode=$mode $out"
      done
    done
  done
done
