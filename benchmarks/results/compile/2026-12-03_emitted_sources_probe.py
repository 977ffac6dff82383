"""Hashes of the emitted sources of every example, mesh and high-order example (float32 and
float64) on the CPU backend and CUDA under the h100 and h200 profiles, each compile in a
fresh cache; and the compile's wall time. Usage: sources.py OUT.json [JOBS]"""
import glob, hashlib, json, os, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
ROOT = os.getcwd()
files = sorted(glob.glob("examples/*.kas") + glob.glob("examples/mesh/*.kas") + glob.glob("examples/highorder/*.kas"))
CHILD = r"""
import sys, time, hashlib, json, warnings
warnings.simplefilter("ignore")
import irfuse
path, backend, dtype, profile = sys.argv[1:5]
kw = {"arch": "sm_90", "profile": profile} if backend == "cuda" else {}
t = time.perf_counter()
p = irfuse.compile(path, backend=backend, dtype=dtype, **kw)
dt = time.perf_counter() - t
progs = getattr(p, "programs", None) or [p]
h = hashlib.sha256("\n//--\n".join(q.source for q in progs).encode()).hexdigest()[:16]
print(json.dumps({"hash": h, "s": dt}))
"""
jobs = []
for f in files:
    for dt in ("f32", "f64"):
        jobs.append((f, "cpu", dt, "cpu"))
        for prof in ("h100", "h200"):
            jobs.append((f, "cuda", dt, prof))
def run(job):
    env = dict(os.environ, IRFUSE_CACHE_DIR=tempfile.mkdtemp())
    r = subprocess.run([sys.executable, "-c", CHILD, *job], capture_output=True, text=True, env=env, timeout=600)
    try:
        return job, json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        return job, {"error": (r.stderr or r.stdout)[-300:]}
with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
    out = {"|".join(j): r for j, r in ex.map(run, jobs)}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(len(out), "compiles", sum("error" in r for r in out.values()), "errors")
