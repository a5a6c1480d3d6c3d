#!/bin/bash
# blk60.sh <rounds> <dirA> <dirB>: as blk.sh, on Open MPI 6.0.0a1
rounds=$1; A=$2; B=$3; pre=<cache>/openmpi-6.0.0a1
for r in $(seq $rounds); do for d in $(printf "$A\n$B\n" | shuf); do
  out=$(PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib timeout 60 mpirun --allow-run-as-root -np 2 --bind-to none --mca mca_base_component_path $pre/lib/openmpi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 2 <checkout>/build/barrier_osu/ompi-6.0.0a1 blocking 20000 2>&1)
  f=no; echo "$out" | grep -q "hand its core" && f=found
  m=no; echo "$out" | grep -q "moved" && m=moved
  echo "$(basename $d) $f $m $(echo "$out" | grep -o " avg_us=[0-9.]*" | head -1 | tr -d ' ') $(echo "$out" | grep -o "placement=[^ ]*")"
done; done
