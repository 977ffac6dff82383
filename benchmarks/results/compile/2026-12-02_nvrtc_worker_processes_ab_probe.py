import json, os, subprocess, sys, tempfile, time, glob
OUT = os.environ.get("OUT", "/tmp")
COLD = r'''
import sys, time
import numpy
import irfuse
t = time.perf_counter(); irfuse.compile(sys.argv[1], backend="cuda", dtype=sys.argv[2], arch="sm_90"); print(time.perf_counter() - t)
'''
progs = sorted(glob.glob("examples/*.kas")) + sorted(glob.glob("examples/mesh/*.kas")) + sorted(glob.glob("examples/highorder/*.kas"))
cases = [(p, "f32") for p in progs] + [("examples/hex8.kas", "f64"), ("examples/highorder/bp3.kas", "f64")]
variants = {"threads (before)": os.path.abspath(".device-carry/base"), "workers": os.path.abspath(".")}
rows = []
t_end = time.time() + float(sys.argv[1])
for rep in range(int(sys.argv[2])):
    for path, dt in cases:
        order = list(variants) if rep % 2 == 0 else list(variants)[::-1]
        for v in order:
            if time.time() > t_end:
                break
            cache = tempfile.mkdtemp()
            q = subprocess.run([sys.executable, "-c", COLD, path, dt], capture_output=True, text=True,
                               env=dict(os.environ, IRFUSE_CACHE_DIR=cache, PYTHONPATH=variants[v]))
            s = float(q.stdout.split()[-1]) if q.returncode == 0 else None
            rows.append({"program": path, "dtype": dt, "variant": v, "rep": rep, "s": s,
                         "error": None if q.returncode == 0 else q.stderr[-300:]})
            print(path, dt, v, s, flush=True)
json.dump(rows, open(os.path.join(OUT, "ab_cold.json"), "w"), indent=1)
