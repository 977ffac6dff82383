"""Where a changing number's cost goes: the Neo-Hookean code on 1,024 elements with `out=`, its
uniform scalars as tensors, as constant floats and with `mu` a float that changes every call;
host us a call back to back, how many calls the fast path took, and the device time a call."""
import sys, time
import numpy as np, torch
import irfuse
from irfuse.api import gpu_calls

def b2b(fn, calls=3000):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    best = per = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls): fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        best = min(best, (t1 - t0) / calls * 1e6); per = min(per, (t2 - t0) / calls * 1e6)
    return best, per

counts = {"fast": 0, "slow": 0}
launch = gpu_calls.FastCall.launch
def counted(self):
    r = launch(self)
    counts["fast" if r is not None else "slow"] += 1
    return r
gpu_calls.FastCall.launch = counted
n = 1024
nh = irfuse.compile("examples/neo_hookean.kas", backend="cuda")
F = (torch.eye(3, device="cuda") + 0.1 * torch.randn(n, 3, 3, device="cuda")).contiguous()
mu_t, lam_t = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
out = [torch.empty_like(F), torch.empty_like(F), torch.empty(n, device="cuda")]
k = iter(range(10**9))
vals = [0.8 + 1e-6 * j for j in range(7)]
cases = {
    "tensors": lambda: nh(F, mu_t, lam_t, out=out),
    "floats, constant": lambda: nh(F, 0.8, 1.5, out=out),
    "mu changing (7 values)": lambda: nh(F, vals[next(k) % 7], 1.5, out=out),
    "mu changing, lam tensor": lambda: nh(F, vals[next(k) % 7], lam_t, out=out),
}
for r in range(2):
    for name, fn in cases.items():
        counts.update(fast=0, slow=0)
        host, per = b2b(fn)
        print(f"{name:28s} host {host:6.2f} us  per call {per:6.2f} us  fast {counts['fast']} slow {counts['slow']}")
from torch.profiler import profile, ProfilerActivity
for name in ("tensors", "mu changing (7 values)"):
    fn = cases[name]
    for _ in range(50): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(200): fn()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    tot = {}
    for e in ev:
        tot.setdefault(e.name[:60], [0, 0.0])
        tot[e.name[:60]][0] += 1; tot[e.name[:60]][1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    print("==", name); [print(f"   {c:5d} x {t / max(c, 1):7.2f} us  {nm}") for nm, (c, t) in tot.items()]
