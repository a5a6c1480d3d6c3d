import sys,re,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) bar=([\d.]+) floor=([\d.]+) ratio=([\d.]+) releases=\d+ paired=([\d.]+)',l)
    if m: d.setdefault(m.group(1),[]).append((float(m.group(4)),float(m.group(5)),float(m.group(2))))
for k in sorted(d):
    v=d[k]; r=[x[0] for x in v]; p=[x[1] for x in v]; b=[x[2] for x in v]
    print('%-4s n=%2d ratio median %.3f [%.3f-%.3f] fast(<1.2) %2d  paired median %.3f  bar median %.1f'%(k,len(v),st.median(r),min(r),max(r),sum(x<1.2 for x in r),st.median(p),st.median(b)))
