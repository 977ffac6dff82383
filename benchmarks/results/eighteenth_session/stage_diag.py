import numpy as np, torch
import irfuse.analysis.kernel_model as km
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs
torch.zeros(1, device="cuda")
n = 1 << 14
w = "bigfusion"
km.STAGED_RUN_BYTES = 0
direct = compile_program(f"examples/{w}.kas", None, "f32", layout="soa")[0]
ref = direct.reference_program
inputs = {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in random_inputs(ref, n, seed=1).items()}
def run(p):
    dev = CudaDevice(p)
    rec = Executor(p, dev).prepare(inputs, n)
    rec.replay()
    o = {k: v.copy() for k, v in rec.outputs().items()}
    dev.close()
    return o
want = run(direct)["F"]
# Partly staged, by hand: the 64K source with D and E's staging removed (they load directly
# between the copies and the wait), then variants.
km.STAGED_RUN_BYTES = 64 * 1024
full = compile_program(f"examples/{w}.kas", None, "f32", layout="soa")[0]
src = full.source
lines = src.split("\n")
def drop_stage(lines, arr):
    out = []
    for l in lines:
        if l.startswith("  if (irf_runs16) irf_load_runs16<") and f"({arr}," in l:
            continue
        if l.startswith("  else { if (active) { v_D") or l.startswith("  else { if (active) { v_E"):
            l = "  " + l[len("  else "):]
        out.append(l)
    return out
part = drop_stage(drop_stage(lines, "irf_s3"), "irf_s4")
part = [l if not l.startswith("  if (irf_runs16) { irf_async_wait()") else
        l.replace(" v_D[0] = irf_s3", " /*D*/ irf_s3[0] += 0; v_D[0] = v_D[0]; //").split(" /*D*/")[0] + " } }" for l in part]
print([l[:150] for l in part if "irf_runs16" in l])
variants = {"part": "\n".join(part)}
# the same with the direct loads of D and E as plain (coherent) loads
variants["part volatile"] = variants["part"].replace("const real_t* __restrict__ g_D", "const real_t* g_D").replace("const real_t* __restrict__ g_E", "const real_t* g_E")
for name, s in variants.items():
    full.source, full.cubin = s, None
    got = run(full)["F"]
    bad = got != want
    print(name, "wrong words", int(bad.sum()), "of", bad.size, flush=True)
    if bad.any():
        e = np.argwhere(bad)[:, -1]
        print("  components wrong:", np.argwhere(bad.any(axis=-1)).tolist()[:30])
        print("  lanes (e % 128) histogram:", np.bincount(e % 128, minlength=128).tolist())
        print("  blocks with errors:", len(np.unique(e // 128)), "of", n // 128)
        i = np.argwhere(bad)[0]
        print("  first", i.tolist(), got[tuple(i)], want[tuple(i)])
