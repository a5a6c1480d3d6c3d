#!/bin/bash
# pacex.sh <version> rounds dirs...: 2 ranks bound, pace mode on Open MPI <version> (4.1 or 5.0.10/6.0.0a1)
v=$1; rounds=$2; shift 2; NP=${NP:-2}; if [ $NP -gt 2 ]; then if [ $v = 4.1 ]; then BIND="--bind-to none --oversubscribe"; else BIND="--bind-to none --map-by :OVERSUBSCRIBE"; fi; else BIND="--bind-to core"; fi
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=build/barrier_osu/ompi-4.1.4
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=build/barrier_osu/ompi-$v; fi
for r in $(seq $rounds); do for d in $(printf "%s\n" "$@" | shuf); do
PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np ${NP:-2} $BIND --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self $prog pace ${ITERS:-400000} 2>&1 | python3 -c "
import sys,re,statistics as st
b=[];f=[]
for l in sys.stdin:
    m=re.search(r'barrier_ns=([\d.]+) floor_ns=([\d.]+)',l)
    if m: b.append(float(m.group(1))); f.append(float(m.group(2)))
if b: print('$(basename $d) np=$NP bar=%.1f floor=%.1f ratio=%.3f'%(st.median(b),st.median(f),st.median([x/y for x,y in zip(b,f)])))
else: print('$(basename $d) FAILED')
"; done; done
