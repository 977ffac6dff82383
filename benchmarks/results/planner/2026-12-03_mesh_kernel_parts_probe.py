"""Per-kernel device times (CUPTI via torch.profiler) of mesh programs next to the cost model's
prediction of each piece (the planned kernels, the runtime's scatter step)."""
import os, sys, numpy as np, torch
sys.path.insert(0, "benchmarks")
import cost_model as cm
import irfuse
from irfuse.planner.profiles import load_profile
from irfuse.planner.cost import runtime_steps_time
profile_name = sys.argv[1] if len(sys.argv) > 1 else "h200"
profile = load_profile(profile_name)
cubes = 88
for name in ["lumped_mass", "p1_residual", "neo_hookean_residual"]:
    for dtype in ("f32", "f64"):
        path = f"examples/mesh/{name}.kas"
        npd = np.float32 if dtype == "f32" else np.float64
        probe = irfuse.compile(path, backend="cpu", dtype=dtype, n=1024)
        inputs, elements, nodes, partials = cm.mesh_inputs(probe, cubes, npd); probe.close()
        prog = irfuse.compile(path, backend="cuda", dtype=dtype, n=elements, profile=profile_name)
        args = {k: v if hasattr(v, "conn") else (torch.from_numpy(np.array(v, order="C")).cuda() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        out = [torch.empty((nodes if o in getattr(prog, "nodal", ()) else elements, *prog.shapes[o]) if o not in prog.uniform else prog.shapes[o], dtype=torch.float32 if dtype == "f32" else torch.float64, device="cuda") for o in prog.outputs]
        measured = cm.timed(lambda: prog(**args, out=out), 30, torch.cuda.synchronize)
        planned, added, kernels = cm.predicted_s(prog, elements, nodes, partials, profile)
        ns = cm.kernel_ns(prog.compiled.module) if not hasattr(prog.compiled, "stages") else []
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as pr:
            for _ in range(20): prog(**args, out=out)
            torch.cuda.synchronize()
        times = {}
        for e in pr.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t = times.setdefault(e.name, [0, 0.0]); t[0] += 1; t[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        print(f"{name} {dtype}: elements {elements} nodes {nodes} partials {partials}; measured {measured*1e6:.1f} us; planned {planned*1e6:.1f} us (kernels {[round(x/1e3,1) for x in ns]}), runtime steps {added*1e6:.1f} us")
        for k, (c, tot) in sorted(times.items(), key=lambda kv: -kv[1][1]):
            print(f"    {k[:70]:70s} x{c/20:.0f}/run  {tot/c:.1f} us")
        prog.close()
