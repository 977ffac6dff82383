"""Which copy loop of the prelude, kept rolled, makes BP3 at order 5 in float64 (h100 plan, its
kernel forced to two blocks an SM) spill: ptxas's registers and spills with each rolled alone. No GPU."""
import sys, re, warnings, time
warnings.simplefilter("ignore")
sys.path.insert(0, "tests")  # (run from the project root)
from conftest import highorder_operators
import irfuse
from irfuse.backend import nvrtc
ops = highorder_operators()
prog = irfuse.compile(ops.bp3_source(5, 7), backend="cuda", dtype="f64", profile="h100", arch="sm_90")
src = prog.source
kname = [k for k in prog.artifact.kernels if k.calls][0].name
# force the kernel's launch bounds to 2 blocks (the step main's compile keeps)
src2 = re.sub(r"__launch_bounds__\((\d+), \d+\) " + re.escape(kname), lambda m: f"__launch_bounds__({m.group(1)}, 2) {kname}", src)
print("launch bounds now:", re.search(r"__launch_bounds__\([^)]*\) " + re.escape(kname), src2).group(0)[:40])
pre_end = src2.index("__device__ __forceinline__ void irf_after_previous_grid()")
def figures(text):
    t = time.perf_counter(); r = nvrtc.compile_cubin(text, "sm_90", use_cache=False); dt = time.perf_counter() - t
    f = r.resources[kname]
    return f"regs {f.registers} spills {f.spill_stores}+{f.spill_loads} nvrtc {dt:.2f} s"
print("main            ", figures(src2))
def roll_all(text, only=None):
    head, rest = text[:pre_end], text[pre_end:]
    # every copy loop of the prelude, or those inside the functions named in `only`
    parts = re.split(r"(?=__device__ __forceinline__ void )", head)
    out = []
    for p in parts:
        name = re.match(r"__device__ __forceinline__ void (\w+)", p)
        if only is None or (name and name.group(1) in only):
            p = re.sub(r"(\n\s*)(for \(int i = (tid|nvec))", r'\1_Pragma("unroll 1") \2', p)
        out.append(p)
    return "".join(out) + rest
print("rolled all      ", figures(roll_all(src2)))
for fn in ("irf_copy", "irf_copy16", "irf_load_async16", "irf_load_pitched", "irf_store_pitched"):
    print(f"rolled {fn:18s}", figures(roll_all(src2, {fn})))
