"""Probe (kept for its record): ptxas's figures (NVRTC for sm_90, no GPU needed) of the kernels of
the P1 and Neo-Hookean tangent diagonals over the mesh and of J2's consistent tangent, both
types: blocks of `by` threads x the resident blocks asked, registers, spilled bytes, shared
words. Run under each tree by PYTHONPATH, from its root, with a tag:
    python PROBE.py TAG"""
import sys, os, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, "tests")
import irfuse
from irfuse.driver.compile import compile_program
from irfuse.driver.front import element_diagonal
from test_jacobians import J2
def figs(module_or_src, dt):
    plan, _ = compile_program(module_or_src, None, dt, compile_gpu=True, arch="sm_90")
    progs = plan.stage_programs() if hasattr(plan, "stage_programs") else [plan]
    out = []
    for p in progs:
        for k in p.kernels:
            r = p.resources(k.name)
            if r and not k.name.startswith("irf_"):
                out.append(f"{k.by}x{k.min_blocks} regs {r.registers} spill {r.spill_stores + r.spill_loads} smem {k.shared_words}")
    return "; ".join(out)
for name in ("p1_residual", "neo_hookean_residual"):
    src = open(f"examples/mesh/{name}.kas").read()
    for dt in ("f32", "f64"):
        m, out = element_diagonal(src, "r", "u", "probe")
        print(sys.argv[1], name, "diagonal", dt, figs(m, dt), flush=True)
for dt in ("f32", "f64"):
    print(sys.argv[1], "j2 tangent", dt, figs(irfuse.jacobian(J2, of="sig", wrt="deps"), dt), flush=True)
