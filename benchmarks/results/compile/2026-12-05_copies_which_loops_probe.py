"""NVRTC for eight examples as emitted, with every copy loop of the prelude kept rolled, and with all
but the asynchronous loads' loops rolled (best of two, sm_90). No GPU."""
import re, time, warnings
warnings.simplefilter("ignore")
import irfuse
from irfuse.backend import nvrtc
def roll_all(text, skip=()):
    pre_end = text.index("__device__ __forceinline__ void irf_after_previous_grid()")
    head, rest = text[:pre_end], text[pre_end:]
    parts = re.split(r"(?=__device__ __forceinline__ void )", head)
    out = []
    for p in parts:
        name = re.match(r"__device__ __forceinline__ void (\w+)", p)
        if not (name and name.group(1) in skip):
            p = re.sub(r"(\n\s*)(for \(int i = (tid|nvec))", r'\1_Pragma("unroll 1") \2', p)
        out.append(p)
    return "".join(out) + rest
def t(text):
    return min(time.perf_counter() - s if (s := time.perf_counter()) and nvrtc.compile_cubin(text, "sm_90", use_cache=False) else 0 for _ in range(2))
tot=[0,0,0]
for f in ["j2_return", "neo_hookean", "precession", "synctest", "stvenant", "bigfusion", "cfl_step", "hex8"]:
    p = irfuse.compile(f"examples/{f}.kas", backend="cuda", arch="sm_90")
    a, b, c = t(p.source), t(roll_all(p.source)), t(roll_all(p.source, {"irf_load_async16"}))
    tot[0]+=a; tot[1]+=b; tot[2]+=c
    print(f"{f:14s} main {a:.3f}  all rolled {b:.3f}  rolled but the async loads {c:.3f}", flush=True)
print("summed", [round(x,2) for x in tot])
