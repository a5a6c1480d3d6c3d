import sys,statistics as st
d={}
for l in open(sys.argv[1]):
    w=l.split()
    if len(w)<3: continue
    try: v=[float(x) for x in w[1:]]
    except: continue
    d.setdefault(w[0],[]).append(v)
for k,L in d.items():
    allv=[x for v in L for x in v]
    fl=[min(v) for v in L]
    print(k,"launches",len(L),"comms",len(allv),"median %.1f"%st.median(allv),"slow(>1.2x launch min) %d"%sum(1 for v in L for x in v if x>1.2*min(v)),
          ">80ns %d"%sum(1 for x in allv if x>80), "p90 %.1f"%sorted(allv)[int(.9*len(allv))])
