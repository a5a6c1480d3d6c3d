import re,sys,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) np=\d+ bar=([\d.]+) floor=([\d.]+) ratio=([\d.]+)',l)
    if m: d.setdefault(m.group(1),[]).append((float(m.group(2)),float(m.group(3)),float(m.group(4))))
for k,v in d.items():
    r=[x[2] for x in v]; b=[x[0] for x in v]
    print(k,'launches',len(v),'barrier/floor median %.3f [%.3f-%.3f]'%(st.median(r),min(r),max(r)),'barrier ns median %.1f'%st.median(b), 'under 1.2x:',sum(x<1.2 for x in r))
