"""Each kernel of the examples, mesh examples and dense random programs (200 statements, seeds 6, 17, 31,
38; 60 statements, seeds 1-8), float32 and float64, compiled for sm_90 by NVRTC (no GPU): the
planner's register count at the peak (`cost.peak_register_words`), the spill it estimates on
the h100 profile, and ptxas's registers and spilled bytes. Run from the project root."""
import sys, glob, numpy as np
import irfuse
from irfuse.dialects.fuse import KernelOp
from irfuse.kernel.bridge import model_from_kernel
from irfuse.planner.cost import peak_register_words, estimated_spill_bytes
from irfuse.planner.profiles import H100
from irfuse.testing.random_programs import random_program
srcs = [(p, p) for p in sorted(glob.glob("examples/*.kas") + glob.glob("examples/mesh/*.kas"))]
srcs += [(f"random:{s}", random_program(s, 200, loops=False, dense=True)) for s in (6, 17, 31, 38)]
srcs += [(f"random60:{s}", random_program(s, 60, loops=False, dense=True)) for s in range(1, 9)]
for name, src in srcs:
    for dtype in ("f32", "f64"):
        isz = 4 if dtype == "f32" else 8
        try:
            prog = irfuse.compile(src, backend="cuda", dtype=dtype, arch="sm_90", profile="h100")
        except Exception as e:
            print(name, dtype, "ERR", str(e)[:80]); continue
        comp = prog.compiled
        arts = [s.artifact for s in comp.stages] if hasattr(comp, "stages") else [comp]
        for a in arts:
            for op in a.module.walk():
                if not isinstance(op, KernelOp): continue
                m = model_from_kernel(op, isz)[0]
                r = a.resources(op.sym_name.data) if hasattr(a, "resources") else None
                info = next((k for k in a.artifact.kernels if k.name == op.sym_name.data), None) if hasattr(a, "artifact") else None
                pk = peak_register_words(m)
                print(f"{name:28s} {dtype} bx={m.bx} by={m.by} thr={m.threads} peak={pk} est_spill={estimated_spill_bytes(m, H100)} "
                      f"ptxas_regs={getattr(r,'registers',None)} spill={(r.spill_stores + r.spill_loads) if r else None} minb={getattr(info,'min_blocks',None)} pred={op.predicted_ns.data/1e3 if op.predicted_ns is not None else None}")
        prog.close()
