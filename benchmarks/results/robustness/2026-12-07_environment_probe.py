"""Every environment variable irfuse reads (and CXX, XDG_CACHE_HOME, XDG_CONFIG_HOME) given 18 bad
values, one at a time, each in a fresh process running the elastic cube of `examples/solve/`
(compile, mesh, tangent matrix, diagonal, operator, CG) and a compile of SyncTest: the result
the same as with no such variable, or an irfuse error; anything else is printed with its
traceback. `python benchmarks/results/robustness/2026-12-07_environment_probe.py [--cold] [VAR ...]`."""
import os, subprocess, sys, tempfile, itertools, json
from concurrent.futures import ThreadPoolExecutor
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
d = tempfile.mkdtemp(prefix="envp-")
afile = os.path.join(d, "afile"); open(afile, "w").write("x")
ro = os.path.join(d, "ro"); os.mkdir(ro); os.chmod(ro, 0o500)
VALUES = ["", " ", "0", "-1", "abc", "1e400", "nan", "inf", "99999999999999999999999", "1.5", "2", afile,
          os.path.join(d, "missing", "deeper"), ro, "x" * 5000, "\t", "/dev/null", "/proc/self"]
COLD = "--cold" in sys.argv  # each run in an empty cache of its own (what a variable read only while building meets)
VARS = [a for a in sys.argv[1:] if a != "--cold"] or ["IRFUSE_CACHE_DIR", "IRFUSE_TANGENT_ROWS", "IRFUSE_PROFILE_DIR", "IRFUSE_MESH_NATIVE",
        "IRFUSE_CXX_TIMEOUT", "IRFUSE_CXX_MEMORY", "IRFUSE_CPU_THREADS", "IRFUSE_CPU_RENDERER", "CXX",
        "XDG_CACHE_HOME", "XDG_CONFIG_HOME"]
def one(var, val):
    env = dict(os.environ)
    env.pop("IRFUSE_CACHE_DIR", None)
    env["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp(dir=d) if COLD else os.path.join(d, "cache")  # unless var overrides
    env[var] = val
    env["IRFUSE_PROBE_ROOT"] = ROOT
    try:
        p = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "2026-12-07_environment_probe_work.py")], cwd=d, env=env, capture_output=True,
                           text=True, timeout=300)
        out = (p.stdout + p.stderr).strip()
    except subprocess.TimeoutExpired:
        out = "TIMEOUT"
    return var, val, out
base = one("IRFUSE_UNUSED", "1")
print("BASE", base[2].splitlines()[-1])
jobs = [(v, x) for v in VARS for x in VALUES]
with ThreadPoolExecutor(2) as ex:
    for var, val, out in ex.map(lambda a: one(*a), jobs):
        lines = out.splitlines()
        first = [l for l in lines if l.startswith(("OK", "IRFUSE", "OTHER", "IMPORT-FAIL", "TIMEOUT"))]
        tag = first[0] if first else (lines[-1] if lines else "")
        if tag.startswith("OK") and tag == base[2].splitlines()[-1]:
            tag = "OK(same)"
        print(f"{var}={val[:40]!r}: {tag[:260]}")
        if "OTHER" in out or "Traceback" in out:
            print("   ", "\n    ".join(lines[-6:]))
