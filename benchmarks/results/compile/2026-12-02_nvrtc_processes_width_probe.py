import json, os, statistics, subprocess, sys, tempfile, time, glob
OUT = os.environ.get("OUT", "/tmp")
CHILD = r'''
import sys, time
from cuda.bindings import nvrtc
src = open(sys.argv[1]).read(); start = float(sys.argv[2])
opts = [b"--gpu-architecture=sm_90", b"--ptxas-options=-v", b"--std=c++17", b"--no-cache", b"-minimal"]
err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
while time.time() < start: time.sleep(0.001)
t = time.perf_counter(); (e,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts); print(time.perf_counter() - t, e)
'''
from irfuse.driver.compile import compile_program
results = {"processes": {}, "cold": []}
for ex, dt in [("synctest", "f32"), ("neo_hookean", "f32"), ("hex8", "f64")]:
    r = compile_program(f"examples/{ex}.kas", compile_gpu=False, dtype=dt)
    p = r[0] if isinstance(r, tuple) else r
    path = tempfile.mktemp(suffix=".cu"); open(path, "w").write(p.source)
    row = {}
    for n in (1, 4):
        runs = []
        for _ in range(3):
            start = time.time() + 1.5
            ps = [subprocess.Popen([sys.executable, "-c", CHILD, path, str(start)], stdout=subprocess.PIPE, text=True) for _ in range(n)]
            runs.append(max(float(q.communicate()[0].split()[0]) for q in ps))
        row[n] = round(statistics.median(runs), 3)
    results["processes"][f"{ex} {dt}"] = row
    print(ex, dt, "processes at once -> slowest compile s", row, flush=True)

COLD = r'''
import sys, time
import numpy
import irfuse.driver.compile as c
c.WIDTH = int(sys.argv[3])
import irfuse
t = time.perf_counter(); irfuse.compile(sys.argv[1], backend="cuda", dtype=sys.argv[2], arch="sm_90"); print(time.perf_counter() - t)
'''
progs = sorted(glob.glob("examples/*.kas")) + sorted(glob.glob("examples/mesh/*.kas")) + sorted(glob.glob("examples/highorder/*.kas"))
cases = [(p, "f32") for p in progs] + [("examples/hex8.kas", "f64"), ("examples/highorder/bp3.kas", "f64")]
t_end = time.time() + float(sys.argv[1])
for rep in range(2):
    for path, dt in cases:
        for width in (4, 1) if rep == 0 else (1, 4):
            if time.time() > t_end:
                break
            cache = tempfile.mkdtemp()
            q = subprocess.run([sys.executable, "-c", COLD, path, dt, str(width)], capture_output=True, text=True,
                               env=dict(os.environ, IRFUSE_CACHE_DIR=cache))
            s = float(q.stdout.split()[-1]) if q.returncode == 0 else None
            results["cold"].append({"program": path, "dtype": dt, "width": width, "rep": rep, "s": s})
            print(path, dt, "WIDTH", width, s, flush=True)
json.dump(results, open(os.path.join(OUT, "nvrtc_width.json"), "w"), indent=1)
