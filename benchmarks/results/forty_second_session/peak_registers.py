import sys, itertools, time
sys.path.insert(0, "/work/main/benchmarks")
from loop_derivatives import programs
import irfuse
from irfuse.driver.compile import run_pipeline
from irfuse.verification.reference import find_program
from irfuse.passes.fuse_partition import FusePartition
from irfuse.analysis.shared_lifetimes import lifetimes
from irfuse.dialects.element_types import element_type, set_module_element_type
def call_words(model):
    need = 0
    for op in model.calls():
        impl = op.impl
        held = sum(max(impl.operand_aps[k].relative()) + 1
                   for k, a in enumerate(op.args) if not model.values[a].shared and not model.values[a].uniform)
        held += len(impl.result_ap.relative())
        need = max(need, held)
    return need
def peak_words(model):
    ops = model.without_barriers()
    first, last = lifetimes(model, ops)
    steps = [0] * (len(ops) + 1)
    for vid, v in model.values.items():
        if not v.shared and not v.uniform and vid in first:
            lo, hi = max(first[vid], 0), min(last[vid], len(ops) - 1)
            if lo <= hi:
                steps[lo] += v.size * model.per_thread
                steps[hi + 1] -= v.size * model.per_thread
    live = max(itertools.accumulate(steps[:-1]), default=0)
    return 24 + call_words(model) + live // 2, live
for name in sys.argv[1:]:
    source, mode, wrt = programs()[name]
    t0 = time.perf_counter()
    module = (irfuse.grad(source, of="E", wrt=wrt, loops="unroll") if mode == "grad" else irfuse.vjp(source, wrt=wrt, loops="unroll"))
    set_module_element_type(module, element_type("f32"))
    module = run_pipeline(module, "kas-dce")
    part = FusePartition(max_size=8, top=1, n=1048576, profile="h200")
    dags, plans, profile = part.search(find_program(module), 4)
    p = plans[0]
    print(name, f"{time.perf_counter()-t0:.1f}s", [(c.model.bx, c.model.by, c.model.per_thread, peak_words(c.model), c.cost.registers, round(c.cost.time*1e3, 4)) for c in p.configs], flush=True)
