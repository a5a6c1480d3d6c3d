import sys,re,statistics as st
b=[];f=[];sh=[];li=None;fl=None;se=[]
for l in sys.stdin:
    m=re.search(r'barrier_ns=([\d.]+) floor_ns=([\d.]+)',l)
    if m: b.append(float(m.group(1))); f.append(float(m.group(2)))
    m=re.search(r'self_ns=([\d.]+),([\d.]+)',l)
    if m: se.append((float(m.group(1)),float(m.group(2))))
    m=re.search(r'line (\d+) of (\d+) candidates, fastest in their trial: (\d+) ns per barrier against (\d+)',l)
    if m: li='%s:%s/%s'%(m.group(1),m.group(3),m.group(4))
    m=re.search(r'floor_line=(\d+) floor_first_ns=([\d.]+) floor_picked_ns=([\d.]+)',l)
    if m: fl='%s:%s/%s'%(m.group(1),m.group(3),m.group(2))
    m=re.search(r'hwbarr pairs rank \S+: releases=(\d+) paired=(\d+)',l)
    if m: sh.append((int(m.group(1)),int(m.group(2))))
n=sum(x for x,_ in sh); p=sum(y for _,y in sh)
if b: print('bar=%.1f floor=%.1f ratio=%.3f releases=%d paired=%.3f line=%s floorline=%s self=%.1f,%.1f'%(st.median(b),st.median(f),st.median([x/y for x,y in zip(b,f)]),n,p/max(n,1),li,fl,st.median([a for a,_ in se]) if se else 0,st.median([c for _,c in se]) if se else 0))
else: print('FAILED')
