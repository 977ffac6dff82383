import glob, json, os, sys, tempfile  # run from the project root: python PROBE OUT.json
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import irfuse.driver.compile as d
from irfuse.kernel.bridge import model_from_kernel
from irfuse.planner.cost import peak_register_words
from irfuse.planner.profiles import H100
from irfuse.dialects.fuse import KernelOp
d._width = lambda: 1
rows = []
real_build = d.build
def build(module, compile_gpu=True, arch=None, sums_kernels=(), width=None):
    element = d.module_element_type(module)
    planned = {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}
    calls = []
    real_each = d._compile_each
    def each(emitted_once, element, levels, arch):
        out = real_each(emitted_once, element, levels, arch)
        calls.append(out)
        return out
    d._compile_each = each
    try:
        prog = real_build(module, compile_gpu, arch, sums_kernels, 1)
    finally:
        d._compile_each = real_each
    (e, c), = calls[0]
    for k in e.kernels:
        if k.name not in planned: continue
        need = peak_register_words(model_from_kernel(planned[k.name], element.itemsize)[0])
        regs = min(H100.max_regs_per_thread, H100.regs_per_sm // (k.min_blocks * k.threads))
        r = c.resources.get(k.name)
        rows.append(dict(kernel=k.name, need=need, regs=regs, ratio=need / regs, blocks=k.min_blocks,
                         spills=(r.spill_stores + r.spill_loads) if r else None, used=r.registers if r else None,
                         steps=len(d._fewer_blocks(k.min_blocks, k.threads)), compiles=len(calls)))
    return prog
d.build = build
paths = sorted(glob.glob("examples/*.kas")) + sorted(glob.glob("examples/mesh/*.kas")) + sorted(glob.glob("examples/highorder/*.kas"))
for p in paths:
    for dt in ("f32", "f64"):
        n0 = len(rows)
        try:
            d.compile_program(p, None, dt, compile_gpu=True, arch="sm_90")
        except Exception as ex:
            print("ERR", p, dt, ex); continue
        for r in rows[n0:]:
            r["program"] = f"{p}:{dt}"
            print(f"{p:40s} {dt} ratio {r['ratio']:.2f} need {r['need']} regs {r['regs']} used {r['used']} spill {r['spills']} steps {r['steps']}", flush=True)
json.dump(rows, open(sys.argv[1], "w"))
