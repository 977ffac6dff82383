import time, os, numpy as np, torch, irfuse
EX = "examples"
def per_call(f, calls=20000, reps=5):
    best = []
    for _ in range(reps):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(calls): f()
        torch.cuda.synchronize(); best.append((time.perf_counter() - t) / calls * 1e6)
    return min(best), sorted(best)[len(best) // 2]
rng = np.random.default_rng(0); n = 1024
sp = irfuse.compile(os.path.join(EX, "synctest.kas"), backend="cuda")
A = torch.from_numpy(rng.random((n, 3, 3), dtype=np.float32)).cuda(); Fo = torch.empty_like(A)
nh = irfuse.compile(os.path.join(EX, "neo_hookean.kas"), backend="cuda")
F = torch.from_numpy((np.eye(3) + 0.1 * rng.standard_normal((n, 3, 3))).astype(np.float32)).cuda()
mu, lam = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
out = [torch.empty_like(F), torch.empty_like(F), torch.empty(n, device="cuda")]
rows = {}
rows["sync out="] = per_call(lambda: sp(A, out=Fo))
rows["nh out="] = per_call(lambda: nh(F, mu, lam, out=out))
rows["nh no out"] = per_call(lambda: nh(F, mu, lam))
nh(F, mu, lam, out=out)
fast = nh._fast
args = (F, mu, lam)
rows["nh matches"] = per_call(lambda: fast.matches(args, {}, out, None))
rows["nh launch"] = per_call(lambda: fast.launch())
rows["nh graph.launch_on"] = per_call(lambda: fast.graph.launch_on(fast.current_stream()))
rows["current_stream"] = per_call(lambda: fast.current_stream())
rows["nh signatures"] = per_call(lambda: list(map(fast.signature, fast.arrays)) != fast.signatures)
from irfuse.api.arguments import same_out
rows["same_out"] = per_call(lambda: same_out(out, fast.out))
def lockonly():
    with nh.lock:
        pass
rows["lock"] = per_call(lockonly)
sp(A, out=Fo); sf = sp._fast
rows["sync matches"] = per_call(lambda: sf.matches((A,), {}, Fo, None))
rows["sync launch"] = per_call(lambda: sf.launch())
for k, v in rows.items(): print(f"{k:24s} min {v[0]:.2f} us  median {v[1]:.2f} us")
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for _ in range(20000): nh(F, mu, lam, out=out)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(15)
pr = cProfile.Profile(); pr.enable()
for _ in range(20000): nh(F, mu, lam)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(20)
