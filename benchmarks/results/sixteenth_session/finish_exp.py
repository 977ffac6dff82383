"""Ad hoc: ways to finish a reduction, timed on StrainEnergy/CflStep/ChainSum (one run per timing)."""
import json, os, sys
import numpy as np

N = 8_388_608
FILES = {"StrainEnergy": "examples/strain_energy.kas", "CflStep": "examples/cfl_step.kas",
         "ChainSum": "benchmarks/programs/chain_sum.kas"}
OLD = len(sys.argv) > 1 and sys.argv[1] == "old"


def timed(rec, k=60):
    for _ in range(5):
        rec.replay()
    return float(np.median([rec.time_once() for _ in range(k)]))


from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs

A = "      IRF_FENCE();  // this block's stores of its value before its count\n      IRF_SYNC();\n      const bool counted_last = tid == 0 && IRF_ARRIVE(counts + g)"
HELP = ('__device__ __forceinline__ unsigned irf_arrive_acq_rel(unsigned* c)\n{\n  unsigned old;\n'
        '  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(c) : "memory");\n  return old;\n}\n')
VARIANTS = {
    "all threads fence.sc (committed)": lambda s: s,
    "thread 0 fence.sc": lambda s: s.replace(A, "      IRF_SYNC();\n      if (tid == 0) IRF_FENCE();\n      const bool counted_last = tid == 0 && IRF_ARRIVE(counts + g)"),
    "thread 0 fence.acq_rel": lambda s: s.replace(A, '      IRF_SYNC();\n      if (tid == 0) asm volatile("fence.acq_rel.gpu;" ::: "memory");\n      const bool counted_last = tid == 0 && IRF_ARRIVE(counts + g)'),
    "thread 0 atom.acq_rel": lambda s: s.replace(A, "      IRF_SYNC();\n      const bool counted_last = tid == 0 && irf_arrive_acq_rel(counts + g)").replace(
        "      IRF_FENCE();  // the other members' stores, made before their counts\n", "").replace(
        "template <int KIND>\n__device__ void irf_finish", HELP + "template <int KIND>\n__device__ void irf_finish"),
}
out = {}
for wl, path in FILES.items():
    plan, _ = compile_program(path, None, "f32")
    inputs = random_inputs(plan.reference_program, N, 1, np.float32)
    base = plan.source
    if OLD:
        dev = CudaDevice(plan)
        rec = Executor(plan, dev).prepare(inputs, N)
        out[wl] = {"old tree: cluster combine kernel": timed(rec)}
        dev.close()
        continue
    res = {}
    ref = None
    for name, f in VARIANTS.items():
        s = f(base)
        assert name.startswith("all") or s != base, name
        plan.source, plan.cubin = s, None
        dev = CudaDevice(plan)
        rec = Executor(plan, dev).prepare(inputs, N)
        rec.replay()
        got = rec.outputs()
        red = {k: v.tobytes() for k, v in got.items() if v.ndim == 0}
        ref = ref or red
        res[name] = timed(rec)
        res[name + " same bits"] = red == ref
        if name.startswith("all"):
            comb = Executor(plan, dev).prepare(inputs, N, finish_in_kernel=False)
            res["combine kernel (group, fences)"] = timed(comb)
        dev.close()
    out[wl] = res
print(json.dumps(out, indent=1))
if not OLD:
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "finish_exp.json"), "w"), indent=1)
