#!/bin/bash
# pairs.sh <4.1|5.0.10|6.0.0a1> <launches> <dir>: pace at 2 ranks bound apart with a `pairs` build, verbose; per launch the ratio, the paired share, the lines picked
v=$1; n=$2; d=$3
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=build/barrier_osu/ompi-4.1.4
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=build/barrier_osu/ompi-$v; fi
for r in $(seq $n); do
PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 1 $EXTRA $prog pace ${ITERS:-400000} 2>&1 | python3 $(dirname $0)/pairs_parse.py
done
