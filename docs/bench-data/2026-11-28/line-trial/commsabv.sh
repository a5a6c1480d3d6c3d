#!/bin/bash
# commsabv.sh version rounds dirs... : comms.c (8 comms, 15 rounds, 10000 barriers), 2 ranks bound
v=$1; rounds=$2; shift 2
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=<tmp>/comms
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=<tmp>/comms-$v; fi
for r in $(seq $rounds); do for d in $(printf "%s\n" "$@" | shuf); do
  printf "%s " $(basename $d)
  PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self $prog 8 15 10000 2>&1 | tail -1
done; done
