"""The mesh element kernels at blocks of 64 against 128, same resident threads: the search's first
two plans (blocks of 128 then 64 before the cost model's blocks' tail, 64 then 128 after it),
timed alternating.

    python3 benchmarks/results/planner/2026-12-06_mesh_block_rows_probe.py [CUBES ...]

From the project root, on the GPU machine. For each mesh example of one element kernel and each
type: both plans compiled with the h100 profile (`fuse-partition{top=2 plan=k}` in the default
pipeline), their element kernels' blocks and launch bounds printed, then `out=` calls back to
back (PyTorch tensors, `cost_model.timed`), medians of seven timings of 20 calls, the two plans
alternating; the model's prediction of each (`cost_model.predicted_s`); the largest difference
of their outputs against the largest output.
"""
import os
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import cost_model  # noqa: E402
import irfuse  # noqa: E402
import torch  # noqa: E402
from irfuse.planner.profiles import load_profile  # noqa: E402

PIPE = ("kas-dce,fuse-partition{top=2 plan=%d},fuse-remap-threads,fuse-promote-registers,fuse-linearize,"
        "fuse-load-by-readers,fuse-allocate-shared,fuse-place-barriers,fuse-verify-races")
EXAMPLES = ("p1_residual", "neo_hookean_residual", "lumped_mass")
profile = load_profile("h100")
for cubes in [int(c) for c in sys.argv[1:]] or [88, 128]:
    for ex in EXAMPLES:
        path = os.path.join(ROOT, "examples", "mesh", ex + ".kas")
        for dtype, np_dtype, t_dtype in (("f32", np.float32, torch.float32), ("f64", np.float64, torch.float64)):
            probe = irfuse.compile(path, backend="cpu", dtype=dtype, n=1024)
            inputs, elements, nodes, partials = cost_model.mesh_inputs(probe, cubes, np_dtype)
            probe.close()
            args = {k: v if hasattr(v, "conn") else (torch.from_numpy(np.array(v, order="C")).cuda()
                                                     if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
            plans, outs, times, shapes = [], [], [], []
            for k in (0, 1):
                p = irfuse.compile(path, backend="cuda", dtype=dtype, n=elements, profile="h100", pipeline=PIPE % k)
                ks = [x for x in p.compiled.kernels if not x.name.startswith("irf_")]
                shapes.append(" ".join(f"by={x.by} min_blocks={x.min_blocks}" for x in ks))
                out = [torch.empty((nodes if o in p.nodal else elements, *p.shapes[o]), dtype=t_dtype, device="cuda")
                       for o in p.outputs]
                plans.append(p)
                outs.append(out)
                times.append([])
            for _ in range(7):
                for k in (0, 1):
                    times[k].append(cost_model.timed(lambda: plans[k](**args, out=outs[k]), 20, torch.cuda.synchronize))
            big = max(float(o.abs().max()) for o in outs[0])
            diff = max(float((a - b).abs().max()) for a, b in zip(outs[0], outs[1]))
            for k in (0, 1):
                planned, added, _ = cost_model.predicted_s(plans[k], elements, nodes, partials, profile)
                print(f"{cubes} {ex} {dtype} plan {k} [{shapes[k]}]: {1e3 * statistics.median(times[k]):.4f} ms "
                      f"(predicted {1e3 * (planned + added):.4f})", flush=True)
            # (which plan is first follows the model: blocks of 128 before its blocks' tail, 64 after)
            by = [int(shape.split()[0][3:]) for shape in shapes]
            small, large = (0, 1) if by[0] < by[1] else (1, 0)
            print(f"{cubes} {ex} {dtype}: {by[small]} / {by[large]} = "
                  f"{statistics.median(times[small]) / statistics.median(times[large]):.3f}; "
                  f"outputs differ by {diff / big:.1e} of the largest", flush=True)
            for p in plans:
                p.close()
