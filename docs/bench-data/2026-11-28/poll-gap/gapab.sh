#!/bin/bash
# gapab.sh <4.1|5.0.10|6.0.0a1> <rounds> <component dir> gaps...: pace at 2 ranks bound apart, one build, coll_hwbarr_line_poll_gap per launch, the gaps shuffled each round
v=$1; rounds=$2; d=$3; shift 3
if [ $v = 4.1 ]; then pre=/usr; ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; prog=build/barrier_osu/ompi-4.1.4
else pre=<cache>/openmpi-$v; ompi=$pre/lib/openmpi; prog=build/barrier_osu/ompi-$v; fi
for r in $(seq $rounds); do for g in $(printf "%s\n" "$@" | shuf); do
PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path $ompi:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_line_poll_gap $g $prog pace ${ITERS:-400000} 2>&1 | python3 -c "
import sys,re,statistics as st
b=[];f=[]
for l in sys.stdin:
    m=re.search(r'barrier_ns=([\d.]+) floor_ns=([\d.]+)',l)
    if m: b.append(float(m.group(1))); f.append(float(m.group(2)))
if b: print('gap$g np=2 bar=%.1f floor=%.1f ratio=%.3f'%(st.median(b),st.median(f),st.median([x/y for x,y in zip(b,f)])))
else: print('gap$g FAILED')
"; done; done
