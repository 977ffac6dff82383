"""Run from the project root. Each planned kernel's first compile: the planner's register count at the peak against the
registers its first step leaves a thread, and whether ptxas spilled there (past SPILL_BYTES_KEPT)."""
import os, sys, glob, tempfile, warnings
warnings.simplefilter("ignore")
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.getcwd())
import irfuse, irfuse.driver.compile as dc
from irfuse.dialects.fuse import KernelOp
from irfuse.kernel.bridge import model_from_kernel
from irfuse.planner.cost import peak_register_words
from irfuse.planner.profiles import H100
from irfuse.testing.random_programs import random_program
rows = []
state = {}
real_first = dc._first_steps
def first_steps(module, itemsize, emitted):
    f = real_first(module, itemsize, emitted)
    planned = {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}
    state["need"] = {k.name: peak_register_words(model_from_kernel(planned[k.name], itemsize)[0]) for k in emitted.kernels if k.name in planned}
    state["first"] = {k.name: f.get(k.name, k.min_blocks) for k in emitted.kernels if k.name in planned}
    state["threads"] = {k.name: k.threads for k in emitted.kernels}
    state["done"] = set()
    return f
dc._first_steps = first_steps
real_each = dc._compile_each
def each(emitted_once, element, levels, arch):
    out = real_each(emitted_once, element, levels, arch)
    for e, c in out:
        for k in e.kernels:
            if k.name in state.get("first", {}) and k.min_blocks == state["first"][k.name] and k.name not in state["done"]:
                state["done"].add(k.name)
                allow = min(H100.max_regs_per_thread, H100.regs_per_sm // (k.min_blocks * k.threads))
                r = c.resources[k.name]
                rows.append((state["tag"], k.name[:30], state["need"][k.name], allow, r.registers, r.spill_stores + r.spill_loads))
    return out
dc._compile_each = each
srcs = [(p, p) for p in sorted(glob.glob("examples/*.kas") + glob.glob("examples/mesh/*.kas") + glob.glob("examples/highorder/*.kas"))]
srcs += [(f"random200:{s}", random_program(s, 200, loops=False, dense=True)) for s in (6, 17, 31, 38)]
srcs += [(f"random60:{s}", random_program(s, 60, loops=False, dense=True)) for s in range(1, 13)]
for name, src in srcs:
    for dtype in ("f32", "f64"):
        for profile in ("h100", "h200"):
            state["tag"] = f"{name} {dtype} {profile}"
            try:
                irfuse.compile(src, backend="cuda", dtype=dtype, arch="sm_90", profile=profile).close()
            except Exception as e:
                print("ERR", name, dtype, str(e)[:100])
for r in rows:
    print(f"{r[0]:40s} {r[1]:30s} need {r[2]:4d} allow {r[3]:3d} ratio {r[2]/r[3]:5.2f} regs {r[4]:3d} spill {r[5]}")
