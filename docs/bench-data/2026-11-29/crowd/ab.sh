#!/bin/bash
# usage: ab.sh <4.1|5.0.10|6.0.0a1> <ranks> <rounds> <dirA> <dirB>; prints one line per launch
v=$1; np=$2; rounds=$3; A=$4; B=$5; mode=${MODE:-persistent}; iters=${ITERS:-1000000}
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=<checkout>/build/barrier_osu/ompi-4.1.4; over=--oversubscribe
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=<checkout>/build/barrier_osu/ompi-$v; over="--map-by :OVERSUBSCRIBE"; fi
bind="--bind-to ${BIND:-core}"; [ $np -gt 2 ] && bind="--bind-to none"
for r in $(seq $rounds); do for d in $(printf "$A\n$B\n" | shuf); do
  printf "%s %s np=%s " $v $(basename $d) $np
  PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib timeout 120 mpirun --allow-run-as-root -np $np $bind $over --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self $prog $mode $iters 1000 2>&1 | grep -o "blocking_us=[0-9.]* persistent_us=[0-9.]* ratio=[0-9.]* ratio_med=[0-9.]*"
done; done
