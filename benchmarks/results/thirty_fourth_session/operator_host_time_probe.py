import time, threading, cProfile, pstats, io, torch, numpy as np, irfuse, irfuse.torch
from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY as ENERGY
n = 4096
F = (torch.eye(3) + 0.2 * torch.rand(n, 3, 3) - 0.1).cuda()
mu, lam = torch.tensor(0.8).cuda(), torch.tensor(1.5).cuda()
op = irfuse.torch.op(ENERGY, name="probe")
def timeit(label, fn, k=300):
    for _ in range(10): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(k): fn()
    host = (time.perf_counter() - t) / k
    torch.cuda.synchronize(); tot = (time.perf_counter() - t) / k
    print(f"{label:40s} host {host*1e6:8.1f} us  total {tot*1e6:8.1f} us", flush=True)
def prof(label, fn, k=300):
    for _ in range(10): fn()
    pr = cProfile.Profile(); pr.enable()
    for _ in range(k): fn()
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print("=== profile:", label); print(s.getvalue()[:6000], flush=True)
prog = op.program.program("primal", "f32", "cuda")
outs = [torch.empty(s, device="cuda") for s in op.program.result_shapes("primal", [F.shape, mu.shape, lam.shape])]
stream = torch.cuda.current_stream().cuda_stream
timeit("direct, out given", lambda: prog(F, mu, lam, out=outs, stream=stream))
timeit("direct, new outputs", lambda: prog(F, mu, lam))
timeit("op forward (no grad)", lambda: op(F, mu, lam))
Fg = F.clone().requires_grad_()
timeit("op forward + autograd.grad", lambda: torch.autograd.grad(op(Fg, mu, lam), Fg))
prof("direct, out given", lambda: prog(F, mu, lam, out=outs, stream=stream))
prof("op forward (no grad)", lambda: op(F, mu, lam))
acc = {}
orig_run = irfuse.torch._run
def timed_run(program, kind, tensors):
    t = time.perf_counter(); r = orig_run(program, kind, tensors); acc.setdefault(kind, []).append(time.perf_counter() - t); return r
irfuse.torch._run = timed_run
timeit("op fwd+grad (timed _run)", lambda: torch.autograd.grad(op(Fg, mu, lam), Fg))
for k in ("primal", "vjp"):
    print(k, "_run mean us", 1e6 * np.mean(acc[k]), flush=True)
irfuse.torch._run = orig_run
# the backward's _run in the autograd thread, profiled there
vjp = op.program.program("vjp", "f32", "cuda")
E = op(Fg, mu, lam)
ct = torch.ones_like(E)
def in_thread():
    prof("vjp program run from another thread (run_on_gpu)", lambda: op.program.run_on_gpu(
        "vjp", "f32", [F, mu, lam, ct], [torch.empty_like(F), torch.empty((), device="cuda"), torch.empty((), device="cuda")], stream))
th = threading.Thread(target=in_thread); th.start(); th.join()
print("done", flush=True)
