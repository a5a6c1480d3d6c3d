#!/bin/bash
# alg.sh <v> <rounds> <alg>...: persistent mode, 2 ranks bound apart, algorithms shuffled per round
v=$1; rounds=$2; shift 2
pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=<checkout>/build/barrier_osu/ompi-$v; d=<checkout>/target/ompi-$v/components
for r in $(seq $rounds); do for a in $(printf "%s\n" "$@" | shuf); do
  printf "%s %s np=2 " $v $a
  PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib timeout 120 mpirun --allow-run-as-root -np 2 --bind-to ${BIND:-core} --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_algorithm $a $prog persistent ${ITERS:-1000000} 1000 2>&1 | grep -o "blocking_us=[0-9.]* persistent_us=[0-9.]* ratio=[0-9.]* ratio_med=[0-9.]*"
done; done
