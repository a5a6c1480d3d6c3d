import statistics as st, sys
d={}
for l in open(sys.argv[1]):
    f=l.split()
    if len(f) < 4 or not f[0].endswith("41"): continue
    d.setdefault(f[0],[]).append((float(f[3].split('=')[1]), f[1], f[2]))
for k,v in sorted(d.items()):
    x=[a for a,_,_ in v]
    print(k, len(x), 'median %.4f'%st.median(x), 'max %.4f'%max(x), '>0.1: %d'%sum(a>0.1 for a in x), 'found %d'%sum(b=='found' for _,b,_ in v), 'moved %d'%sum(c=='moved' for _,_,c in v))
