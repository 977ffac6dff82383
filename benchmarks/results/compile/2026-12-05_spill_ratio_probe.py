"""For every kernel of the examples (plain, mesh, high-order BP1/BP3 at orders 3-6) and of random
programs, compiled for the GPU (NVRTC, sm_90, no GPU): the planner's register count over what its
first step leaves a thread, and whether ptxas spilled it there (past SPILL_BYTES_KEPT)."""
import glob, json, os, sys, tempfile, warnings
warnings.simplefilter("ignore")
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import irfuse
import irfuse.driver.compile as dc
from irfuse.planner.cost import peak_register_words
from irfuse.planner.profiles import H100
from irfuse.kernel.bridge import model_from_kernel
from irfuse.dialects.fuse import KernelOp

rows = []
ctx = {}
real_first = dc._first_steps
def first_steps(module, itemsize, emitted):
    out = real_first(module, itemsize, emitted)
    planned = {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}
    for k in emitted.kernels:  # (a program's modules may be built side by side: kept by kernel)
        if k.name in planned:
            need = peak_register_words(model_from_kernel(planned[k.name], itemsize)[0])
            b = out.get(k.name, k.min_blocks)
            ctx["need"][k.name] = (need, min(H100.max_regs_per_thread, H100.regs_per_sm // (b * k.threads)), b)
    return out
dc._first_steps = first_steps
real_spills = dc._spills
def spills(cubin, kernel):
    s = real_spills(cubin, kernel)
    n = ctx.get("need", {}).get(kernel.name)
    r = cubin.resources.get(kernel.name)
    if n and kernel.min_blocks == n[2]:
        rows.append({"program": ctx["program"], "kernel": kernel.name, "need": n[0], "regs": n[1],
                     "ratio": n[0] / n[1], "spilled": s, "bytes": (r.spill_stores + r.spill_loads) if r else None,
                     "ptxas_regs": r.registers if r else None})
    return s
dc._spills = spills

def programs():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")
    for f in sorted(glob.glob(f"{root}/*.kas")) + sorted(glob.glob(f"{root}/mesh/*.kas")):
        yield os.path.relpath(f, root), open(f).read(), f
    sys.path.insert(0, f"{root}/highorder")
    import operators as ops  # noqa
    for order in (3, 4, 5, 6):
        yield f"bp3 p{order}", ops.bp3_source(order, order + 2), None
        yield f"bp1 p{order}", ops.bp1_source(order, order + 2), None
    from irfuse.testing.random_programs import random_program
    for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20):
        yield f"random {seed}", random_program(seed, 100, loops=False, dense=True), None

for name, text, path in programs():
    for dtype in ("f32", "f64"):
        for profile in ("h100", "h200"):
            ctx["program"], ctx["need"] = f"{name} {dtype} {profile}", {}
            try:
                irfuse.compile(path or text, backend="cuda", dtype=dtype, profile=profile, arch="sm_90")
            except Exception as e:  # noqa
                print("failed", ctx["program"], type(e).__name__, str(e)[:100], flush=True)
    print(name, len(rows), flush=True)
json.dump(rows, open(sys.argv[2] if len(sys.argv) > 2 else "spill_ratio.json", "w"), indent=0)
