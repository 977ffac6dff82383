"""The cost model's shared-memory wavefronts of the element kernel each bake-off cell's plan
chooses, value by value, to set beside Nsight Compute's count (benchmarks/NOTES.md, High-order
elements, 2026-12-04, 12:10 UTC). Run from the project root, no GPU needed:

    python benchmarks/results/highorder/2026-12-04_model_wavefronts_probe.py bk3:6:c bp3:6:c bk3:6:n

each argument KIND:ORDER:c (tables fixed, `constants=`) or :n (tables as inputs).
"""
import os
import sys
import tempfile

os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
sys.path.insert(0, "tests")
sys.path.insert(0, os.path.join("examples", "highorder"))
import highorder_reference as ref  # noqa: E402
import operators  # noqa: E402

import irfuse  # noqa: E402
import irfuse.planner.search as search  # noqa: E402
from irfuse.analysis.bank_conflicts import all_touches, call_access, kernel_wavefronts, value_wavefronts  # noqa: E402

planned = []
real = search.plan_program


def recorded(*args, **kwargs):
    result = real(*args, **kwargs)
    planned.append(result)
    return result


search.plan_program = recorded
for spec in sys.argv[1:]:
    kind, p, fixed = spec.split(":")
    p = int(p)
    B, D, _ = ref.lagrange_tables(p, p + 2)
    tables = {"B": B} if kind.endswith("1") else {"B": B, "D": D}
    planned.clear()
    irfuse.compile(getattr(operators, f"{kind}_source")(p, p + 2), backend="cuda", dtype="f64",
                   filename=f"{kind}_p{p}.kas", arch="sm_90", **({"constants": tables} if fixed == "c" else {}))
    _, plans = planned[-1]
    for config in plans[0].configs:
        m = config.model
        if len(config.group) < 2:
            continue
        total = kernel_wavefronts(m)
        print(f"{spec}: block ({m.bx}, {m.by}), {total} wavefronts a block, {total / m.by:.1f} an element")
        touches = all_touches(m)
        for vid, v in m.values.items():
            if v.shared:
                parts = [call_access(ap, bx, m.bx, m.by, remap, v.size, v.pitch, m.itemsize)[0] * runs
                         for ap, bx, remap, runs in touches.get(vid, [])]
                print(f"  value {vid}: {v.size} words, pitch {v.pitch}, "
                      f"{value_wavefronts(m, vid, v.pitch, touches.get(vid, []))[0]} wavefronts (calls: {parts})")
