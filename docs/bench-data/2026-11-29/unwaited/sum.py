import sys,re,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r"(\S+) (\S+) np=(\d+) blocking_us=([\d.]+) persistent_us=([\d.]+) ratio=([\d.]+) ratio_med=([\d.]+)",l)
    if not m: continue
    k=(m[1],m[2],m[3]); d.setdefault(k,[]).append((float(m[4]),float(m[5]),float(m[7])))
for k,v in sorted(d.items()):
    b=[x[0] for x in v]; p=[x[1] for x in v]; r=[x[2] for x in v]
    print(k, len(v), "blocking %.3f [%.3f-%.3f]"%(st.median(b),min(b),max(b)), "persistent %.3f [%.3f-%.3f]"%(st.median(p),min(p),max(p)), "ratio_med %.2f [%.2f-%.2f]"%(st.median(r),min(r),max(r)))
