"""Each field of a tuning result (`irfuse tune --json`) that `compile(tuning=)` reads, given
other kinds of value, compiled in a fresh process and checked against the reference: the
result, or irfuse's error naming the file; anything else is marked `!!`. Run from the root:
    python benchmarks/results/robustness/2026-12-07_tuning_fields_probe.py
"""
import json, os, sys, subprocess, tempfile, copy
made = tempfile.mkdtemp()
subprocess.run(["irfuse", "tune", "examples/strain_energy.kas", "--backend", "cpu", "--top", "2", "--n", "1000",
                "--repeat", "2", "--rounds", "1", "--json", os.path.join(made, "tuning.json")],
               capture_output=True, check=True, env=dict(os.environ, IRFUSE_CACHE_DIR=os.path.join(made, "cache")))
base = json.load(open(os.path.join(made, "tuning.json")))
JUNK = [None, "", "x", 0, -1, 10**30, 1.5, float("nan"), [], {}, [1], {"a": 1}, True, "f16", "soa", "/etc/passwd", "examples/hex8.kas"]
cases = []
for k in ["program", "dtype", "layout", "best"]:
    for j in JUNK: cases.append((k, None, j))
for k in ["pipeline", "groups", "blocks", "plan"]:
    for j in JUNK: cases.append(("best", k, j))
cases += [("best", "pipeline", base["best"]["pipeline"].replace("max-size=8", "max-size=99999999999999999999")),
          ("best", "pipeline", base["best"]["pipeline"].replace("plan=0", "plan=1")),
          ("best", "pipeline", base["best"]["pipeline"] + ",fuse-partition"),
          ("best", "pipeline", "kas-dce"),
          ("best", "pipeline", base["best"]["pipeline"].replace("fuse-verify-races", "")),]
tmp = tempfile.mkdtemp()
code = r'''
import sys, numpy as np, irfuse
try:
    p = irfuse.compile("examples/strain_energy.kas", backend="cpu", tuning=sys.argv[1])
    rng = np.random.default_rng(0)
    r = p.check(rng.standard_normal((300, 6)).astype(p.dtype), rng.random(300).astype(p.dtype), rng.standard_normal((6, 6)).astype(p.dtype))
    print("OK" if r.ok else "WRONG")
except irfuse.IrfuseError as e:
    print("ERR", str(e).splitlines()[0][:170])
'''
def one(i_c):
    i, (k, sub, j) = i_c
    d = copy.deepcopy(base)
    if sub is None: d[k] = j
    else: d[k][sub] = j
    path = os.path.join(tmp, f"t{i}.json")
    with open(path, "w") as f: json.dump(d, f)
    env = dict(os.environ, IRFUSE_CACHE_DIR=os.path.join(tmp, "cache"))
    try:
        r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60, env=env)
        res = (r.stdout.strip().splitlines() or ["NOTHING rc=%d %s" % (r.returncode, r.stderr.strip().splitlines()[-3:])])[-1]
    except subprocess.TimeoutExpired: res = "TIMEOUT"
    return (k, sub, repr(j)[:40]), res
from concurrent.futures import ThreadPoolExecutor
counts = {}
with ThreadPoolExecutor(2) as ex:
    for c, res in ex.map(one, enumerate(cases)):
        tag = res.split()[0]; counts[tag] = counts.get(tag, 0) + 1
        print(("!! " if tag not in ("OK", "ERR") else "   "), c, res[:170])
print(counts)
