#!/bin/bash
# pacet.sh <4.1|5.0.10|6.0.0a1> <rounds> <barrier_osu> dirs...: pace at 2 ranks bound apart under MPI_THREAD_MULTIPLE (BARRIER_OSU_THREADS=multiple), builds interleaved
v=$1; rounds=$2; prog=$3; shift 3
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; fi
for r in $(seq $rounds); do for d in $(printf "%s\n" "$@" | shuf); do
BARRIER_OSU_THREADS=multiple PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np 2 --bind-to core -x BARRIER_OSU_THREADS --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self $prog pace ${ITERS:-400000} 2>&1 | python3 -c "
import sys,re,statistics as st
b=[];f=[]
for l in sys.stdin:
    m=re.search(r'barrier_ns=([\d.]+) floor_ns=([\d.]+)',l)
    if m: b.append(float(m.group(1))); f.append(float(m.group(2)))
if b: print('$(basename $d) np=2 bar=%.1f floor=%.1f ratio=%.3f'%(st.median(b),st.median(f),st.median([x/y for x,y in zip(b,f)])))
else: print('$(basename $d) FAILED')
"; done; done
