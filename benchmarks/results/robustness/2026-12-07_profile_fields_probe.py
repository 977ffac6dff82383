"""Each figure of a device profile (the H100's and the CPU's) given 1, 10**9, 10**30, 1e-30,
1e30 and 0.5 (names: other text), in a file passed as `profile=`, a program compiled on the
CPU backend in a fresh process and checked against the reference: the result, or irfuse's
error naming the file or what no kernel can fit; anything else is marked `!!`. Run from the
root: python benchmarks/results/robustness/2026-12-07_profile_fields_probe.py
"""
import json, os, sys, subprocess, tempfile, itertools
from irfuse.planner.profiles import H100, CPU
cases = []
for base in (H100, CPU):
    d = base.to_json()
    for k, v in d.items():
        vals = ["weird", ""] if isinstance(v, str) else [1, 10**9, 10**30, 1e-30, 1e30, 0.5] 
        for x in vals:
            cases.append((base.name, k, x))
print(len(cases), "cases", file=sys.stderr)
code = r'''
import json, sys, numpy as np, irfuse
path = sys.argv[1]
try:
    p = irfuse.compile("examples/strain_energy.kas", backend="cpu", dtype="f64", profile=path)
    rng = np.random.default_rng(0)
    r = p.check(rng.standard_normal((300, 6)), rng.random(300), rng.standard_normal((6, 6)))
    print("OK" if r.ok else "WRONG")
except irfuse.IrfuseError as e:
    print("ERR", str(e).splitlines()[0][:150])
'''
out = {}
tmp = tempfile.mkdtemp()
def one(c):
    name, k, x = c
    base = H100 if name == H100.name else CPU
    d = base.to_json(); d[k] = x
    path = os.path.join(tmp, f"p_{abs(hash(c))}.json")
    json.dump(d, open(path, "w"))
    env = dict(os.environ, IRFUSE_CACHE_DIR=os.path.join(tmp, "cache"))
    try:
        r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60, env=env)
        res = (r.stdout.strip().splitlines() or ["NOTHING rc=%d %s" % (r.returncode, r.stderr.strip().splitlines()[-1:] )])[-1]
    except subprocess.TimeoutExpired:
        res = "TIMEOUT"
    return c, res
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(2) as ex:
    for c, res in ex.map(one, cases):
        tag = res.split()[0]
        if tag != "OK" and not res.startswith("ERR"):
            print("!!", c, res)
        out.setdefault(tag, 0); out[tag] = out[tag] + 1
        if res.startswith("ERR"): print("  ", c, res[:140])
print(out)
