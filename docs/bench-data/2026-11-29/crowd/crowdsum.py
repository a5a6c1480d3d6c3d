#!/usr/bin/env python3
"""crowdsum.py <file>...: per build, launches, found / moved / neither, and the figures' medians
(blocking: OSU average, launches above 0.1 us, slowest; persistent: persistent us and
persistent/blocking ratio_med, overall and by found/moved/neither; paired per round where both
builds' launches were neither found nor moved)."""
import statistics as st, sys
for fn in sys.argv[1:]:
    rows = []
    for l in open(fn):
        f = l.split()
        kv = dict(x.split('=', 1) for x in f[2:] if '=' in x)
        rows.append((f[0], f[1], kv))
    print(fn)
    for b in sorted({r[0] for r in rows}):
        v = [r for r in rows if r[0] == b]
        cnt = {k: sum(1 for r in v if r[1] == k) for k in ('found', 'moved', 'no')}
        if 'avg_us' in v[0][2]:
            x = [float(r[2]['avg_us']) for r in v]
            print(f"  {b}: {len(v)} launches {cnt}; median {st.median(x):.4f} us, above 0.1 us {sum(a > 0.1 for a in x)}, slowest {max(x):.4f}")
            for k in ('found', 'moved', 'no'):
                w = [float(r[2]['avg_us']) for r in v if r[1] == k]
                if w: print(f"     {k}: {len(w)}, median {st.median(w):.4f}, range {min(w):.4f}-{max(w):.4f}")
        else:
            p = [float(r[2]['persistent_us']) for r in v]; q = [float(r[2]['ratio_med']) for r in v]
            print(f"  {b}: {len(v)} launches {cnt}; persistent median {st.median(p):.4f} us, ratio_med median {st.median(q):.3f}")
            for k in ('found', 'moved', 'no'):
                w = [r for r in v if r[1] == k]
                if w: print(f"     {k}: {len(w)}, persistent {st.median(float(r[2]['persistent_us']) for r in w):.4f}, ratio_med {st.median(float(r[2]['ratio_med']) for r in w):.3f}")
    # paired by round (launches come in pairs, one of each build)
    builds = sorted({r[0] for r in rows})
    if len(builds) == 2 and 'persistent_us' in rows[0][2]:
        a, b = builds
        rat = []
        for i in range(0, len(rows) - 1, 2):
            pr = {r[0]: r for r in rows[i:i + 2]}
            if a in pr and b in pr and pr[a][1] == 'no' and pr[b][1] == 'no':
                rat.append(float(pr[b][2]['persistent_us']) / float(pr[a][2]['persistent_us']))
        if rat:
            print(f"  paired, neither found nor moved: {len(rat)} rounds, {b}/{a} persistent median {st.median(rat):.3f}, {b} faster in {sum(x < 1 for x in rat)}")
