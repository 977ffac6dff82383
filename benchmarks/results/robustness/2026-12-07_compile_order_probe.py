"""The examples' fingerprints (`benchmarks/fingerprint.py`: plan, CUDA and CPU sources, outputs;
both types, the cpu, h100 and h200 profiles) compiled in one process in a shuffled or reversed
order: compared with `fingerprint.py`'s sorted order, they show whether what a process compiled
before changes what it compiles now. Run from the project root:

    python benchmarks/fingerprint.py --json sorted.json --profiles cpu h100 h200
    python benchmarks/results/robustness/2026-12-07_compile_order_probe.py shuffled sorted.json
"""

import glob
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, "benchmarks")
import fingerprint as fp  # noqa: E402

order, compare = sys.argv[1], sys.argv[2]
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="irfuse-fp-")
paths = sorted(glob.glob(os.path.join(fp.ROOT, "examples", "*.kas")) +
               glob.glob(os.path.join(fp.ROOT, "examples", "mesh", "*.kas")) +
               glob.glob(os.path.join(fp.ROOT, "examples", "highorder", "*.kas")))
keys = [(p, d, pr) for p in paths for d in ("f32", "f64") for pr in ("cpu", "h100", "h200")]
if order == "reversed":
    keys = keys[::-1]
elif order == "shuffled":
    random.Random(5).shuffle(keys)
table = {f"{os.path.relpath(p, fp.ROOT)} {d} {pr}": fp.fingerprint(p, d, pr) for p, d, pr in keys}
with open(compare) as f:
    before = json.load(f)
differ = [k for k in sorted(set(before) | set(table)) if before.get(k) != table.get(k)]
print(f"{order}: {len(table)} fingerprints, {len(differ)} differ from {compare}", *differ, sep="\n")
