import subprocess, sys, random, re, statistics as st, os
pre, comp, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pkglib = pre + "/lib/openmpi"
prog = sys.argv[4]
env = dict(os.environ, PATH=pre+"/bin:"+os.environ["PATH"], LD_LIBRARY_PATH=pre+"/lib")
modes = {
 "without": [pkglib, []],
 "prio0": [comp+":"+pkglib, ["--mca","coll_hwbarr_priority","0"]],
 "excluded": [comp+":"+pkglib, ["--mca","coll","^hwbarr"]],
 "with": [comp+":"+pkglib, []],
}
res = {m: {"init": [], "fin": [], "tot": []} for m in modes}
for i in range(n):
    order = list(modes); random.shuffle(order)
    for m in order:
        path, extra = modes[m]
        cmd = ["mpirun","--allow-run-as-root","--oversubscribe","--bind-to","none","-np","2","--mca","mca_base_component_path",path]+extra+[prog]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60).stdout
        ini = [float(x) for x in re.findall(r"init=(\d+)", out)]; fin = [float(x) for x in re.findall(r"fin=(\d+)", out)]
        assert len(ini)==2, out
        res[m]["init"].append(max(ini)); res[m]["fin"].append(max(fin)); res[m]["tot"].append(max(a+b for a,b in zip(ini,fin)))
for m in modes:
    r = res[m]
    print(f"{m:9s} init med {st.median(r['init'])/1000:.2f} ms  fin med {st.median(r['fin'])/1000:.2f} ms  tot med {st.median(r['tot'])/1000:.2f} min {min(r['tot'])/1000:.2f}")
w = st.median(res["without"]["tot"])
for m in modes: print(m, "ratio", round(st.median(res[m]["tot"])/w, 3))
