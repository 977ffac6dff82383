"""Where a cached load's time goes on this host: fresh processes, medians."""
import json, os, statistics, subprocess, sys, tempfile

CHILD = r'''
import time, sys, json
t0 = time.perf_counter()
import irfuse
mode = sys.argv[1]
out = {}
if mode == "bindings":
    t = time.perf_counter(); from cuda.bindings import driver; out["import cuda.bindings.driver"] = time.perf_counter() - t
    t = time.perf_counter(); driver.cuInit(0); out["cuInit"] = time.perf_counter() - t
elif mode == "ctypes":
    import ctypes
    t = time.perf_counter(); lib = ctypes.CDLL("libcuda.so.1"); out["dlopen libcuda"] = time.perf_counter() - t
    t = time.perf_counter(); r = lib.cuInit(0); out["cuInit (ctypes)"] = time.perf_counter() - t
    d = ctypes.c_int(); lib.cuDeviceGet(ctypes.byref(d), 0); ma, mi = ctypes.c_int(), ctypes.c_int()
    lib.cuDeviceGetAttribute(ctypes.byref(ma), 75, d); lib.cuDeviceGetAttribute(ctypes.byref(mi), 76, d)
    out["arch"] = f"sm_{ma.value}{mi.value}"
elif mode == "pycuda":
    t = time.perf_counter(); import pycuda.driver as drv; out["import pycuda.driver"] = time.perf_counter() - t
    t = time.perf_counter(); drv.init(); out["pycuda init"] = time.perf_counter() - t
else:
    backend, arch = mode.split(":")
    t = time.perf_counter(); p = irfuse.compile(sys.argv[2], backend=backend, arch=arch or None)
    out["compile (cached)"] = time.perf_counter() - t
    if len(sys.argv) > 3:
        import numpy as np
        t = time.perf_counter(); p.profile  # noqa
        out["first call"] = None
out["total"] = time.perf_counter() - t0
print(json.dumps(out))
'''

def run(args, env):
    p = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env)
    if p.returncode:
        return {"error": p.stderr[-500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])

cache = tempfile.mkdtemp()
env = dict(os.environ, IRFUSE_CACHE_DIR=cache)
ex = sys.argv[1] if len(sys.argv) > 1 else "examples/neo_hookean.kas"
print(run(["cuda:", ex], env))  # cold, fills the cache
rows = {}
for mode in ["bindings", "ctypes", "pycuda", "cuda:", "cuda:sm_90", "auto:"]:
    runs = [run([mode, ex], env) for _ in range(7)]
    keys = [k for k in runs[0] if k != "arch" and k != "error"]
    rows[mode] = {k: round(statistics.median(r[k] for r in runs if k in r) * 1e3, 2) for k in keys}
    if "error" in runs[0]: rows[mode]["error"] = runs[0]["error"]
    print(mode, rows[mode], flush=True)
