#!/bin/bash
# commsabp.sh rounds spec... ; spec = dir:line_candidates
rounds=$1; shift
for r in $(seq $rounds); do for s in $(printf "%s\n" "$@" | shuf); do
  d=${s%%:*}; lc=${s##*:}
  printf "%s-lc%s " $(basename $d) $lc
  mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_line_candidates $lc <tmp>/comms 8 15 10000 2>&1 | tail -1
done; done
