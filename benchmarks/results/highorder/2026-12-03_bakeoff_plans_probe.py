"""Probe (kept for its record): the plan a GPU compile makes (the h100 profile, float64 or
float32) of every bake-off operator at the orders given, as (calls, implementations, bx, by,
predicted us) per kernel; run under each tree by PYTHONPATH and compare the two JSONs.
    python PROBE.py 1,2,...,8 f64 OUT.json"""
import sys, os, tempfile, json, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'examples', 'highorder')); import operators as O
from irfuse.driver.options import compile_options
from irfuse.driver.planning import search
from irfuse.driver.sources import read_source
out = {}
dtype = sys.argv[2] if len(sys.argv) > 2 else "f64"
for p in [int(x) for x in sys.argv[1].split(",")]:
    for k in ("bk1","bk3","bp1","bp3"):
        with tempfile.NamedTemporaryFile("w", suffix=".kas", delete=False) as f:
            f.write(getattr(O, k + "_source")(p, p + 2))
        stages, _ = search(read_source(f.name), compile_options(dtype, "cuda", profile="h100"), 1, 8, None)
        sig = []
        for stage in stages:
            for c in sorted(stage.plans[0].configs, key=lambda c: (c.dag, c.group)):
                sig.append([list(c.group), [i.name for i in c.impls], c.model.bx, c.model.by, round(c.cost.time * 1e6, 1)])
        out[f"{k} p{p}"] = sig
        print(k, p, flush=True, file=sys.stderr)
json.dump(out, open(sys.argv[3], "w"))
