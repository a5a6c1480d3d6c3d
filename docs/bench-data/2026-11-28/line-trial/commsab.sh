#!/bin/bash
# commsab.sh rounds dirs... : comms.c 8 comms, per dir launch, print dir + per-comm medians
rounds=$1; shift
for r in $(seq $rounds); do for d in $(printf "%s\n" "$@" | shuf); do
  printf "%s " $(basename $d)
  mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3:$d --mca coll hwbarr,basic,libnbc,self ${EXTRA} <tmp>/comms 8 15 10000 2>&1 | tail -1
done; done
