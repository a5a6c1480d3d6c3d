import re,sys,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) np=\d+ blocking_us=([\d.]+) persistent_us=([\d.]+) ratio=([\d.]+) ratio_med=([\d.]+)',l)
    if m: d.setdefault(m.group(1),[]).append(tuple(float(m.group(i)) for i in (2,3,4,5)))
for k,v in sorted(d.items()):
    print(k,len(v),'blocking %.3f persistent %.3f ratio %.2f [%.2f-%.2f] ratio_med %.2f'%(st.median([x[0] for x in v]),st.median([x[1] for x in v]),st.median([x[2] for x in v]),min(x[2] for x in v),max(x[2] for x in v),st.median([x[3] for x in v])))
