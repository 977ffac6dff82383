"""The cost model's shared-memory wavefronts of the element kernel each bake-off cell's plan
chooses, to set beside Nsight Compute's count (benchmarks/NOTES.md, High-order elements,
2026-12-04, 12:10 UTC): as counted (`analysis.bank_conflicts.wavefronts`: a float64 word an
access), value by value, and with a thread's two contiguous words merged into one 16-byte
access where every thread's pair starts on an even word (what ptxas does where it can prove
the alignment: `LDS.128`/`STS.128`, quarter-warp phases), the plan the same. No GPU needed;
from the project root:

    python benchmarks/results/highorder/2026-12-04_model_wavefronts_probe.py bk3:6:c bp3:6:c bp1:6:c bk3:6:n

each argument KIND:ORDER:c (tables fixed, `constants=`) or :n (tables as inputs).
"""
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
sys.path.insert(0, "tests")
sys.path.insert(0, os.path.join("examples", "highorder"))
import highorder_reference as ref  # noqa: E402
import operators  # noqa: E402

import irfuse  # noqa: E402
import irfuse.analysis.bank_conflicts as bc  # noqa: E402
import irfuse.planner.search as search  # noqa: E402
from irfuse.transforms.allocation import allocate_shared  # noqa: E402

as_counted = bc.wavefronts


def _busiest(phases: np.ndarray, words: np.ndarray, groups: int) -> int:
    """Summed over phases: the most distinct words one bank group serves."""
    total = 0
    for phase in np.unique(phases):
        distinct = np.unique(words[phases == phase])
        total += int(np.bincount(distinct % groups).max())
    return total


def pairs_merged(words: np.ndarray, tids: np.ndarray, itemsize: int) -> int:
    if itemsize != 8 or words.size == 0:
        return as_counted(words, tids, itemsize)
    total, j, steps = 0, 0, words.shape[1]
    while j < steps:
        a = words[:, j]
        live = a >= 0
        if j + 1 < steps and live.any() and np.all((a[live] % 2 == 0) & (words[live, j + 1] == a[live] + 1)):
            total += _busiest(tids[live] // 8, a[live] // 2, 8)  # 16-byte accesses: 8 threads a phase
            j += 2
            continue
        if live.any():
            total += _busiest(tids[live] // 16, a[live], 16)  # 8-byte accesses: 16 threads a phase
        j += 1
    return total


planned = []
real = search.plan_program


def recorded(*args, **kwargs):
    result = real(*args, **kwargs)
    planned.append(result)
    return result


def main():
    search.plan_program = recorded
    for spec in sys.argv[1:]:
        kind, p, fixed = spec.split(":")
        p = int(p)
        B, D, _ = ref.lagrange_tables(p, p + 2)
        tables = {"B": B} if kind.endswith("1") else {"B": B, "D": D}
        planned.clear()
        irfuse.compile(getattr(operators, f"{kind}_source")(p, p + 2), backend="cuda", dtype="f64",
                       filename=f"{kind}_p{p}.kas", arch="sm_90", **({"constants": tables} if fixed == "c" else {}))
        for config in planned[-1][1][0].configs:
            if len(config.group) < 2:
                continue
            m = allocate_shared(config.model)
            counts = []
            for count in (as_counted, pairs_merged):
                bc.wavefronts = count
                bc.call_access.cache_clear()
                counts.append(bc.kernel_wavefronts(m) / m.by)
            bc.wavefronts = as_counted
            bc.call_access.cache_clear()
            print(f"{spec}: block ({m.bx}, {m.by}): {counts[0]:.1f} wavefronts an element as counted, "
                  f"{counts[1]:.1f} with pairs merged")
            touches = bc.all_touches(m)
            for vid, v in m.values.items():
                if v.shared:
                    parts = [bc.call_access(ap, bx, m.bx, m.by, remap, v.size, v.pitch, m.itemsize)[0] * runs
                             for ap, bx, remap, runs in touches.get(vid, [])]
                    print(f"  value {vid}: {v.size} words, pitch {v.pitch}, "
                          f"{bc.value_wavefronts(m, vid, v.pitch, touches.get(vid, []))[0]} wavefronts (calls: {parts})")


if __name__ == "__main__":  # (importable: the 2026-12-05 probe takes its pairs' count)
    main()
