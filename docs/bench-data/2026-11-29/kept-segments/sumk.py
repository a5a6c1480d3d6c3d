import collections,re,sys
d=collections.defaultdict(lambda: [[],[]])
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) barriers=0 us=([\d.]+)\s+barriers=1 us=([\d.]+)',l)
    if m: d[m.group(1)][0].append(float(m.group(2))); d[m.group(1)][1].append(float(m.group(3)))
for k in sorted(d):
    a,b=sorted(d[k][0]),sorted(d[k][1])
    print(f"{k:22s} n={len(b)} dup+free {a[0]:.1f}-{a[-1]:.1f} med {a[len(a)//2]:.1f} | dup+barrier+free {b[0]:.1f}-{b[-1]:.1f} med {b[len(b)//2]:.1f}")
