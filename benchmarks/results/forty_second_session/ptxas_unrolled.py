import sys, time, json
sys.path.insert(0, "/work/main/benchmarks")
from loop_derivatives import programs
import irfuse
from irfuse.dialects.fuse import KernelOp
from irfuse.driver.compile import lower, build, PlanningOptions
from irfuse.dialects.element_types import element_type, set_module_element_type
from irfuse.dialects.layouts import set_module_layout, set_module_strides
names = sys.argv[2:]
out = {}
for name in names:
    source, mode, wrt = programs()[name]
    for loops in (sys.argv[1],):
        t0 = time.perf_counter()
        module = (irfuse.grad(source, of="E", wrt=wrt, loops=loops) if mode == "grad"
                  else irfuse.vjp(source, wrt=wrt, loops=loops))
        set_module_element_type(module, element_type("f32")); set_module_layout(module, "aos"); set_module_strides(module, {})
        low = lower(module, None, PlanningOptions(n=1048576, profile="h200"))
        pred = sum(k.predicted_ns.data for k in low.walk() if isinstance(k, KernelOp) and k.predicted_ns is not None)
        prog = build(low, True, "sm_90")
        ks = []
        for k in prog.kernels:
            r = prog.cubin.resources.get(k.name)
            ks.append((k.name, k.threads, k.by, getattr(k, "min_blocks", None), r.registers, r.spill_stores, r.spill_loads))
        dt = time.perf_counter() - t0
        print(name, loops, f"pred {pred/1e6:.4f} ms", f"{dt:.1f}s", ks, flush=True)
        out[f"{name}/{loops}"] = {"pred_ms": pred / 1e6, "kernels": ks}
json.dump(out, open("/tmp/w/spillexp.json", "w"), indent=1)
