"""Hashes of the emitted sources (no NVRTC: `compile_gpu=False`) of the bake-off's operators at
orders 1-8 (BP1, BP3, BK1, BK3; float32 and float64; the 1-D tables as inputs and fixed) and of
the best plans of the planner benchmark's derivative programs and J2's Jacobian, under the h100, h200 and cpu profiles: a search
change that must keep every plan is checked by running this with each tree (`PYTHONPATH`) and
comparing. Usage: python 2026-12-05_budget_sources_probe.py OUT.json (from the project root)."""
import hashlib, json, os, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.path.join(os.getcwd(), "examples", "highorder"))
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import highorder_reference as ref  # noqa: E402 -- the 1-D tables, as the bake-off fixes them
import operators  # noqa: E402
import irfuse  # noqa: E402
from irfuse.driver.compile import PlanningOptions, compile_from, _options  # noqa: E402
from irfuse.driver.options import constant_numbers  # noqa: E402
from irfuse.driver.sources import Source  # noqa: E402


def digest(program) -> str:
    progs = getattr(program, "stages", None)
    text = "\n//--\n".join(s.program.source for s in progs) if progs else program.source
    return hashlib.sha256(text.encode()).hexdigest()[:16]


out = {}
if "--derivatives-only" not in sys.argv:
    for kind in ("bp1", "bp3", "bk1", "bk3"):
        for p in range(1, 9):
            src = getattr(operators, f"{kind}_source")(p, p + 2)
            B, D, _ = ref.lagrange_tables(p, p + 2)
            for tables in ((), constant_numbers({"B": B, "D": D})):
                for prof in ("h100", "h200", "cpu"):
                    for dt in ("f32", "f64"):
                        key = f"{kind}|{p}|{'fixed' if tables else 'inputs'}|{prof}|{dt}"
                        try:
                            o = _options(None, dt, False, None, PlanningOptions(profile=prof), "aos", tables)
                            program, _ = compile_from(Source(src, f"{kind}_p{p}.kas"), o)
                            out[key] = digest(program)
                        except Exception as e:  # (an order a kind cannot plan: the same error either way)
                            out[key] = "error " + type(e).__name__ + " " + str(e)[:80]

mesh = os.path.join("examples", "mesh")
derivatives = {
    "lumped_mass vjp": lambda: irfuse.vjp(os.path.join(mesh, "lumped_mass.kas"), wrt=("X", "dN", "quarter", "rho")),
    "neo_hookean vjp": lambda: irfuse.vjp(os.path.join("examples", "neo_hookean.kas"), wrt=("F",)),
    "power_iteration vjp": lambda: irfuse.vjp(os.path.join("examples", "power_iteration.kas"), wrt=("A", "x"),
                                              loops="unroll"),
    "j2 jacobian": lambda: irfuse.jacobian(os.path.join("examples", "j2_return.kas"), of="sig", wrt="deps"),
}
from irfuse.passes.kas_dce import eliminate_dead_code  # noqa: E402
from irfuse.planner.profiles import load_profile  # noqa: E402
from irfuse.planner.search import plan_program  # noqa: E402
from irfuse.verification.reference import find_program  # noqa: E402

for name, make in derivatives.items():  # (modules: their best plans compared, not sources)
    for prof in ("h100", "h200", "cpu"):
        for itemsize in (4, 8):
            key = f"{name}|{prof}|{itemsize}"
            try:
                program = find_program(make())
                eliminate_dead_code(program)
                _, plans = plan_program(program, 1 << 22, load_profile(prof), itemsize, 8, top=1)
                described = [(c.dag, c.group, c.by, [i.function_name for i in c.impls]) for c in plans[0].configs]
                out[key] = hashlib.sha256(repr((described, plans[0].predicted_time)).encode()).hexdigest()[:16]
            except Exception as e:
                out[key] = "error " + type(e).__name__ + " " + str(e)[:80]
json.dump(out, open(sys.argv[1], "w"), indent=1)  # (`--derivatives-only`: the derivative programs alone)
print(len(out), "compiles", sum(v.startswith("error") for v in out.values()), "errors")
