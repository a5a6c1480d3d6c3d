#!/bin/bash
# shared.sh <v> <rounds> <dirA> <dirB>: 2 ranks unbound, barrier_osu persistent, verbose 2;
# per launch: build, whether the core was found shared, the yields of progress passes, ratio_med, placement
v=$1; rounds=$2; A=$3; B=$4
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; over=--oversubscribe; else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; over=; fi
prog=<checkout>/build/barrier_osu/ompi-$v; [ $v = 4.1 ] && prog=<checkout>/build/barrier_osu/ompi-4.1.4
for r in $(seq $rounds); do for d in $(printf "$A\n$B\n" | shuf); do
  out=$(PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib timeout 120 mpirun --allow-run-as-root -np 2 --bind-to none $over --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 2 $prog persistent 1000000 1000 2>&1)
  f=no; echo "$out" | grep -q "hand its core" && f=found; echo "$out" | grep -q "moved it off" && f=moved
  y=$(echo "$out" | grep -o "gave the core up [0-9]* times" | grep -o "[0-9]*" | paste -sd+ | bc)
  echo "$(basename $d) $f yields=${y:-0} $(echo "$out" | grep -o "blocking_us=[0-9.]* persistent_us=[0-9.]* ratio=[0-9.]* ratio_med=[0-9.]*") $(echo "$out" | grep -o "placement=[^ ]*")"
done; done
