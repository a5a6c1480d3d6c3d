#!/bin/bash
# (the file two-ranks-start-on-one-cpu-4.1.4.txt: components = the build of this date, qe41 = the same with quiet told yields ending the shared-core finding, not kept; columns: build, core found shared or not, OSU average, placement rank:cpu at start>end/cpus seen)
# blk.sh <rounds> <dirA> <dirB>: 2 ranks unbound, barrier_osu blocking 20000 (Open MPI 4.1.4), verbose 2
rounds=$1; A=$2; B=$3
for r in $(seq $rounds); do for d in $(printf "$A\n$B\n" | shuf); do
  out=$(mpirun --allow-run-as-root -np 2 --bind-to none --mca mca_base_component_path $d:/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 2 <checkout>/build/barrier_osu/ompi-4.1.4 blocking 20000 2>&1)
  f=no; echo "$out" | grep -q "hand its core" && f=found
  m=no; echo "$out" | grep -q "moved it off" && m=moved; echo "$(basename $d) $f $m $(echo "$out" | grep -o "avg_us=[0-9.]*") $(echo "$out" | grep -o "placement=[^ ]*")"
done; done
