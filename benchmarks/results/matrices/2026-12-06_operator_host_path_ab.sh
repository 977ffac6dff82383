#!/usr/bin/env bash
# The operator's shortened product (2026-12-06_operator_host_path.patch, on main) against the
# product before it (the patch reversed on a copy of irfuse/ put first on PYTHONPATH), on the
# Morton box of 64 cubes (1.57 M tets) by `2026-12-06_apply_host_probe.py`, alternating twice;
# then `tangents.py`'s matrix-free rows at both sizes and the GPU tests of the operators,
# tangents and diagonals on the tree. From the repository's root on a GPU, results under $OUT:
#   bash THIS
set -u
R=benchmarks/results/matrices
rm -rf /tmp/before && mkdir -p /tmp/before && cp -r irfuse /tmp/before/
(cd /tmp/before && git apply -R $OLDPWD/$R/2026-12-06_operator_host_path.patch) || exit 1
for tree in new before new before; do
  [ "$tree" = before ] && export PYTHONPATH=/tmp/before || unset PYTHONPATH
  echo "=== $tree"
  timeout 120 python3 $R/2026-12-06_apply_host_probe.py 64 2>&1 | grep -E "^round|Error|tottime|operators.py|programs.py|host_calls|arguments.py" | head -24
done
unset PYTHONPATH
(cd benchmarks && timeout 150 python3 tangents.py --cubes 64,128 --j2-elements 0 --skip-jax --skip-peers-above 1 \
  --repeat 20 --json $OUT/tangents_operator_host_path.json 2>&1 | grep -E "^copy|Error")
python3 - <<'PY'
import json, os
d = json.load(open(os.path.join(os.environ["OUT"], "tangents_operator_host_path.json")))
for k, v in d["sizes"].items():
    m = v["matrix-free"]
    print(k, "tets: residual", round(m["residual ms"], 4), "apply", round(m["tangent apply ms"], 4),
          "ratio", round(m["tangent apply ms"] / m["residual ms"], 3), "assembly", round(v["ms"], 3))
PY
timeout 200 python3 -m pytest -p no:warnings tests/test_gpu.py -n 8 -k "tangent or matri or operator or diagonal" 2>&1 | tail -3
