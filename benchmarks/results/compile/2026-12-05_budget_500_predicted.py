"""The best plans' predicted times of the bake-off cells whose CPU-profile sources differ between
the search budgets of 1,000 and 500 configurations (`2026-12-05_budget_sources_*.json`). Run from
the project root."""
import sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, "examples/highorder")
import operators
from irfuse.frontend.irgen import compile_source
from irfuse.passes.kas_dce import eliminate_dead_code
from irfuse.planner.profiles import load_profile
from irfuse.planner.search import plan_program
from irfuse.verification.reference import find_program
from irfuse.planner.profiles import DEFAULT_BATCH
cells = [("bp1",5,8),("bp3",3,8),("bp3",4,4),("bp3",4,8),("bp3",5,4),("bp3",5,8),("bp3",6,4),("bk3",3,8),("bk3",4,4),("bk3",4,8),("bk3",5,4),("bk3",5,8),("bk3",6,4)]
for kind,p,isz in cells:
    src = getattr(operators, f"{kind}_source")(p, p+2)
    res=[]
    for budget in (1000, 500):
        prog = find_program(compile_source(src, "t.kas").module); eliminate_dead_code(prog)
        _, plans = plan_program(prog, DEFAULT_BATCH, load_profile("cpu"), isz, 8, top=1, budget=budget)
        res.append(plans[0].predicted_time)
    print(kind, p, isz, f"{res[0]*1e3:.3f} {res[1]*1e3:.3f} ms  ratio {res[1]/res[0]:.4f}")
