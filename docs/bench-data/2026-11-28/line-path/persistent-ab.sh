#!/bin/bash
# abx.sh <version> <np> <rounds> dirs... ; barrier_osu $MODE
v=$1; np=$2; rounds=$3; shift 3; mode=${MODE:-persistent}; iters=${ITERS:-300000}
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=build/barrier_osu/ompi-4.1.4; over=--oversubscribe
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=build/barrier_osu/ompi-$v; over="--map-by :OVERSUBSCRIBE"; fi
bind="--bind-to core"; [ $np -gt 2 ] && bind="--bind-to none $over"
for r in $(seq $rounds); do for d in $(printf "%s\n" "$@" | shuf); do
  printf "%s np=%s " $(basename $d) $np
  PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np $np $bind --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self $prog $mode $iters 1000 2>&1 | grep -o "blocking_us=[0-9.]* persistent_us=[0-9.]* ratio=[0-9.]* ratio_med=[0-9.]*\|avg_us=[0-9.]*" || echo FAILED
done; done
