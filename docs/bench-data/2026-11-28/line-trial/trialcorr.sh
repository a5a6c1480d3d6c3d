#!/bin/bash
# per launch: per comm medians (comms.c order: WORLD then dups) and the trial lines of rank 0 (by cid order)
d=$1; n=$2
for i in $(seq $n); do
  mpirun --allow-run-as-root -np 2 --bind-to core --mca mca_base_component_path /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3:$d --mca coll hwbarr,basic,libnbc,self --mca coll_hwbarr_verbose 2 <tmp>/comms 8 15 10000 2>&1 | python3 -c '
import sys,re
tr={}; last=None
for l in sys.stdin:
    m=re.search(r"\(cid (\d+), 2 ranks.*line (\d+) of [0-9]+ candidates, fastest in their trial: (\d+) ns per barrier against (\d+)",l)
    if m: tr[int(m.group(1))]=(m.group(2),m.group(3))
    elif re.match(r"^[\d. ]+$",l.strip()) and l.strip(): last=l.split()
cids=sorted(tr)
out=[]
for k,c in enumerate(cids):
    if last and k<len(last): out.append("%s(L%s,t%s)"%(last[k],tr[c][0],tr[c][1]))
print(" ".join(out))
'
done
