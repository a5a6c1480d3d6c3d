import re,sys,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) np=\d+ bar=([\d.]+) floor=([\d.]+) ratio=([\d.]+)',l)
    if m: d.setdefault(m.group(1),[]).append((float(m.group(4)),float(m.group(2))))
for k,v in sorted(d.items()):
    r=[x for x,_ in v]; b=[y for _,y in v]
    print(k,len(v),'ratio median %.3f [%.3f-%.3f] under1.2: %d  bar ns median %.1f'%(st.median(r),min(r),max(r),sum(x<1.2 for x in r),st.median(b)))
