"""The cost model against the clock: every example and mesh example, the time its plan is
predicted to take next to the time its calls take, on the GPU (CUDA) or on the CPU backend.

    python benchmarks/cost_model.py [--backend cuda|cpu] [--profile h200] [--n N] [--cubes C]
                                    [--dtype f32 f64] [--calls 30] [--examples NAME ...] [--json out.json]
    python benchmarks/cost_model.py --measured RUN.json     (no GPU: this tree's predictions
                                                             against an earlier run's times)

Each program is compiled for the backend with the batch it runs (`n=`, elements; a mesh
program's elements), planned with `--profile` (the GPU's by default: `h200`; `cpu` for the CPU
backend). **Predicted**: the sum of its kernels' `predicted_ns` as the planner chose them, with
each pass over the nodes of a staged program scaled from the planned batch to the mesh's nodes
(launch overhead kept whole), plus the steps the runtime adds and the planner does not choose
(`irfuse.planner.cost.runtime_steps_time`: a scatter's adding of its partials into the nodes, a
reduction's partials combined by a kernel of their own or by the reducing kernel's last block,
and on a GPU the wait either way adds, `COMBINE_WAIT`). **Measured**: `--calls` calls with `out=`
back to back, the device synchronized once after them (CUDA: PyTorch tensors, CUDA events on
the current stream; CPU: NumPy arrays, wall time), per call, after as many warm-up calls: what a
loop of calls meets, host time included where it is not hidden behind the device's.

Inputs: uniform values in [-1, 1) (`random_inputs`) for the examples; for the mesh examples a
box of P1 tetrahedra (`box_tetrahedra(C)`, Morton order), small displacements and velocities,
a lumped mass in [0.5, 1.5), the reference element's gradients. The ratio measured / predicted
and whether it is within 15% (the issue's bound) are the table's last columns.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
WITHIN = 0.15


def kernel_ns(module) -> list[int]:
    """The predicted nanoseconds of each planned kernel of a lowered module."""
    return [op.predicted_ns.data for op in module.walk() if op.name == "fuse.kernel" and op.predicted_ns is not None]


def predicted_s(program, n: int, nodes: int | None, partials: int, profile) -> tuple[float, float, int]:
    """(planned kernels' seconds, runtime steps' seconds, kernels) of a compiled program run on
    `n` elements (and `nodes` nodes, `partials` scatter partials, where it works over a mesh)."""
    from irfuse.planner.cost import runtime_steps_time

    compiled = program.compiled
    if hasattr(compiled, "stages"):
        stages = [(s.over, s.artifact) for s in compiled.stages]
        # (a call in one piece runs the fused stages: the same planned kernels, the node pass
        # after the elements launched by the elements stage, whose scatter runs no kernel)
        run = [(s.over, s.artifact) for s in compiled.fused or compiled.stages]
    else:
        stages = run = [("elements", compiled)]
    planned = added = 0.0
    kernels = 0
    for over, plan in stages:
        ns = kernel_ns(plan.module)
        kernels += len(ns)
        batch = nodes if over == "nodes" and nodes is not None else n
        for t in ns:
            t *= 1e-9
            if batch != n:  # (planned for n elements, run over the nodes)
                t = profile.launch_overhead + (t - profile.launch_overhead) * batch / n
            planned += t
    for over, plan in run:
        added += runtime_steps_time(plan, profile, nodes if over == "nodes" and nodes is not None else n,
                                    nodes or 0, partials)
    return planned, added, kernels


def mesh_inputs(program, cubes: int, dtype) -> tuple[dict, int, int, int]:
    """The mesh examples' arguments (see the module), their elements, nodes and scatter
    partials."""
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(cubes)
    rng = np.random.default_rng(0)
    values = {"X": X, "u": 1e-3 * rng.standard_normal(X.shape), "v": 1e-2 * rng.standard_normal(X.shape),
              "m": rng.uniform(0.5, 1.5, len(X)), "dN": DN, "quarter": np.full(4, 0.25), "lam": 1.5, "mu": 0.7,
              "rho": 2.0, "dt": 1e-3}
    out, prepared = {}, Connectivity(conn, len(X))
    for name in program.inputs:
        if name in program.index_inputs:
            out[name] = prepared
        else:
            v = values[name]
            out[name] = v if np.isscalar(v) else np.asarray(v, dtype)
    return out, len(conn), len(X), len(prepared.inverse.partials)


def timed(call, calls: int, sync) -> float:
    """Seconds a call, `calls` of them back to back after as many warm-up calls."""
    for _ in range(calls):
        call()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - t0) / calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["cuda", "cpu"], default=None, help="default: cuda where a GPU answers")
    ap.add_argument("--profile", default=None, help="the profile planned for (default: h200 on CUDA, cpu on the CPU)")
    ap.add_argument("--n", type=int, default=None, help="elements of the examples (default 4,194,304 on CUDA, "
                                                        "2,097,152 on the CPU: arrays past its caches)")
    ap.add_argument("--cubes", type=int, default=None,
                    help="box of 6 C^3 tetrahedra (default 88 on CUDA, 64 on the CPU)")
    ap.add_argument("--dtype", nargs="+", default=["f32", "f64"])
    ap.add_argument("--calls", type=int, default=None, help="default 30 on CUDA, 5 on the CPU")
    ap.add_argument("--examples", nargs="+", default=None, metavar="NAME", help="only these (file names without .kas)")
    ap.add_argument("--measured", default=None, metavar="RUN.json",
                    help="no calls: price the programs as this tree plans them against the times an "
                         "earlier run measured (its JSON; its backend, profile and sizes), e.g. to refit "
                         "the model on a machine without the GPU")
    ap.add_argument("--json", default=meta.result_path("planner"))
    args = ap.parse_args(argv)
    earlier = None
    if args.measured:
        import json
        try:
            with open(args.measured) as f:
                earlier = json.load(f)
            if not all(k in earlier for k in ("backend", "profile", "n", "cubes", "rows")):
                raise ValueError("not a JSON this script wrote (backend, profile, n, cubes, rows)")
        except (OSError, ValueError) as e:
            ap.error(f"--measured {args.measured}: {e}")
        args.backend, args.profile = earlier["backend"], earlier["profile"]
        args.n, args.cubes = earlier["n"], earlier["cubes"]
        args.examples = args.examples or sorted({os.path.basename(r["program"])[:-4] for r in earlier["rows"]})
        args.dtype = sorted({r["dtype"] for r in earlier["rows"]} & set(args.dtype))
        clock = {(r["program"], r["dtype"]): r["measured_s"] for r in earlier["rows"]}

    import irfuse
    from irfuse.planner.profiles import load_profile
    from irfuse.verification.reference import DTYPES, random_inputs
    from rich.console import Console
    from rich.table import Table

    backend = args.backend or ("cuda" if meta._gpu()[0] else "cpu")
    arch = {"arch": "sm_90"} if earlier and backend == "cuda" else {}  # (compiled for the GPU measured)
    profile_name = args.profile or ("h200" if backend == "cuda" else "cpu")
    profile = load_profile(profile_name)
    n = args.n or (4_194_304 if backend == "cuda" else 2_097_152)
    cubes = args.cubes or (88 if backend == "cuda" else 64)
    calls = args.calls or (30 if backend == "cuda" else 5)
    if earlier:
        def to_side(a):
            return a

        def empty(shape, dtype):
            return None

        def sync():
            return None
    elif backend == "cuda":
        import torch

        def to_side(a):
            # (np.array keeps a 0-d array 0-d, where np.ascontiguousarray makes it 1-d)
            return torch.from_numpy(np.array(a, order="C")).cuda() if isinstance(a, np.ndarray) else a

        def empty(shape, dtype):
            return torch.empty(shape, dtype=torch.float64 if dtype == np.float64 else torch.float32, device="cuda")
        sync = torch.cuda.synchronize
    else:
        def to_side(a):
            return a

        def empty(shape, dtype):
            return np.empty(shape, dtype)

        def sync():
            return None
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas"))) + \
        sorted(glob.glob(os.path.join(ROOT, "examples", "mesh", "*.kas")))
    if args.examples:
        paths = [p for p in paths if os.path.basename(p)[:-4] in args.examples]
    rows = []
    for path in paths:
        name = os.path.relpath(path, os.path.join(ROOT, "examples"))
        is_mesh = "mesh" + os.sep in name
        for dtype in args.dtype:
            np_dtype = DTYPES[dtype]
            if is_mesh:
                probe = irfuse.compile(path, backend="cpu", dtype=dtype, n=1024)
                inputs, elements, nodes, partials = mesh_inputs(probe, cubes, np_dtype)
                probe.close()
            else:
                elements, nodes, partials = n, None, 0
            if earlier and (name, dtype) not in clock:
                continue
            program = irfuse.compile(path, backend=backend, dtype=dtype, n=elements, profile=profile_name, **arch)
            if not is_mesh and not earlier:
                inputs = random_inputs(program.compiled.reference_program, n, 1, np_dtype)
                inputs = {k: v.reshape(program.shapes[k]) if k in program.uniform else v for k, v in inputs.items()}
            args_on = {} if earlier else {k: v if hasattr(v, "conn") else to_side(v) for k, v in inputs.items()}
            out = [] if earlier else [empty(program.shapes[o] if o in program.uniform else
                         (nodes if o in getattr(program, "nodal", ()) else elements, *program.shapes[o]), np_dtype)
                   for o in program.outputs]
            measured = clock[name, dtype] if earlier else timed(lambda: program(**args_on, out=out), calls, sync)
            planned, added, kernels = predicted_s(program, elements, nodes, partials, profile)
            predicted = planned + added
            ratio = measured / predicted
            rows.append({"program": name, "dtype": dtype, "elements": elements, "nodes": nodes, "kernels": kernels,
                         "planned_s": planned, "runtime_steps_s": added, "predicted_s": predicted,
                         "measured_s": measured, "measured_over_predicted": ratio,
                         "within": abs(ratio - 1) <= WITHIN})
            print(f"{name} {dtype}: predicted {predicted * 1e3:.3f} ms, measured {measured * 1e3:.3f} ms "
                  f"({ratio:.2f}x)", flush=True)
            program.close()
    where = meta._gpu()[0] if backend == "cuda" else f"CPU backend, {os.cpu_count()} cores"
    if earlier:
        where = f"{earlier['meta'].get('gpu') or earlier['backend']}'s times from {os.path.basename(args.measured)}"
    table = Table(title=f"{where}: the cost model ({profile_name} profile) against calls back to back; "
                        f"{n:,} elements, meshes of {6 * cubes ** 3:,} tetrahedra")
    for col in ("program", "dtype", "kernels", "planned", "runtime steps", "predicted", "measured",
                "measured / predicted", f"within {WITHIN:.0%}"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["program"], r["dtype"], str(r["kernels"]), f"{r['planned_s'] * 1e3:.3f} ms",
                      f"{r['runtime_steps_s'] * 1e3:.3f} ms", f"{r['predicted_s'] * 1e3:.3f} ms",
                      f"{r['measured_s'] * 1e3:.3f} ms", f"{r['measured_over_predicted']:.2f}",
                      "yes" if r["within"] else "no")
    Console(width=200).print(table)
    with open(args.json, "w") as f:
        meta.dump({"backend": backend, "profile": profile_name, "n": n, "cubes": cubes, "rows": rows,
                   **({"measured_from": args.measured} if earlier else {})}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
