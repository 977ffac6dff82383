"""Why the Neo-Hookean code's call with `out=` costs more host time than StrainEnergy's: host us
a call back to back for each, then cProfile (tottime) over 5,000 calls of each."""
import cProfile, io, pstats, time
import numpy as np, torch
import irfuse

def b2b(fn, calls=3000):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls): fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best

n = 1024
rng = np.random.default_rng(0)
nh = irfuse.compile("examples/neo_hookean.kas", backend="cuda")
F = (torch.eye(3, device="cuda") + 0.1 * torch.randn(n, 3, 3, device="cuda")).contiguous()
mu_t, lam_t = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
nh_out = [torch.empty_like(F), torch.empty_like(F), torch.empty(n, device="cuda")]
energy = irfuse.compile("examples/strain_energy.kas", backend="cuda")
e_in = {k: torch.from_numpy(rng.standard_normal((n, *energy.shapes[k]) if k not in energy.uniform
        else energy.shapes[k]).astype(np.float32)).cuda() for k in energy.inputs}
e_out = [torch.empty(energy.shapes[o] if o in energy.uniform else (n, *energy.shapes[o]), device="cuda")
         for o in energy.outputs]
sync = irfuse.compile("examples/synctest.kas", backend="cuda")
A = torch.rand(n, 3, 3, device="cuda"); Fo = torch.empty_like(A)
cases = {"SyncTest out=": lambda: sync(A, out=Fo), "NeoHookean out=": lambda: nh(F, mu_t, lam_t, out=nh_out),
         "Energy named out=": lambda: energy(**e_in, out=e_out)}
for r in range(2):
    for k, fn in cases.items():
        print(f"{k:20s} {b2b(fn):6.2f} us")
for k in ("NeoHookean out=", "Energy named out="):
    print(k, "graph launches as dependent:", type(nh._fast).__name__ if k.startswith("Neo") else type(energy._fast).__name__)
    fn = cases[k]
    pr = cProfile.Profile(); pr.enable()
    for _ in range(5000): fn()
    pr.disable(); torch.cuda.synchronize()
    out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(14)
    print("=== cProfile", k); print("\n".join(out.getvalue().splitlines()[6:24]))
