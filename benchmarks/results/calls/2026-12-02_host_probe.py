"""Where a call's host time goes (StrainEnergy with and without out=) on the GPU machine."""
import cProfile, io, os, pstats, sys, time, timeit
import numpy as np, torch
import irfuse
from irfuse.api import output_sets, gpu_calls
from irfuse.runtime.cuda_graph import stream_capturing

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

def micro(fn, number=20000):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

rng = np.random.default_rng(0)
n = 1024
energy = irfuse.compile("examples/strain_energy.kas", backend="cuda")
e_in = {name: torch.from_numpy(rng.standard_normal((n, *energy.shapes[name]) if name not in energy.uniform
        else energy.shapes[name]).astype(np.float32)).cuda() for name in energy.inputs}
e_out = [torch.empty(energy.shapes[o] if o in energy.uniform else (n, *energy.shapes[o]), device="cuda")
         for o in energy.outputs]
pos = [e_in[k] for k in energy.inputs]
sync = irfuse.compile("examples/synctest.kas", backend="cuda")
A = torch.rand(n, 3, 3, device="cuda"); Fo = torch.empty_like(A)
g = torch.cuda.CUDAGraph(); x = torch.zeros(16, device="cuda")
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    x.add_(1)
torch.cuda.synchronize()
with torch.cuda.graph(g):
    x.add_(1)
nh = irfuse.compile("examples/neo_hookean.kas", backend="cuda")
F = (torch.eye(3, device="cuda") + 0.1 * torch.randn(n, 3, 3, device="cuda")).contiguous()
mu_t, lam_t = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
nh_out = [torch.empty_like(F), torch.empty_like(F), torch.empty(n, device="cuda")]
sys.path.insert(0, "benchmarks")
from simulations import mesh_arrays, LAMBDA, MU, DT
t, prepared, conn, X, _ = mesh_arrays(torch, 16)
res = irfuse.compile("examples/mesh/p1_residual.kas", backend="cuda")
r_out = torch.empty_like(t["u"])
lam32, mu32 = torch.tensor(LAMBDA, device="cuda"), torch.tensor(MU, device="cuda")
step = irfuse.compile("examples/mesh/explicit_step.kas", backend="cuda")
s_out = [torch.empty_like(t["u"]), torch.empty_like(t["u"])]
dt_t = torch.tensor(DT, device="cuda")
rounds = {}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    row = rounds.setdefault(r, {})
    row["graph replay"] = b2b(g.replay)
    row["torch.empty"] = b2b(lambda: torch.empty(n, 6, device="cuda"))
    row["SyncTest out="] = b2b(lambda: sync(A, out=Fo))
    row["SyncTest no out"] = b2b(lambda: sync(A))
    row["Energy named out="] = b2b(lambda: energy(**e_in, out=e_out))
    row["Energy named no out"] = b2b(lambda: energy(**e_in))
    row["Energy pos out="] = b2b(lambda: energy(*pos, out=e_out))
    row["Energy pos no out"] = b2b(lambda: energy(*pos))
    row["NeoHookean no out"] = b2b(lambda: nh(F, mu_t, lam_t))
    row["P1 residual out="] = b2b(lambda: res(t["X"], t["u"], prepared, t["dN"], lam32, mu32, out=r_out))
    row["P1 residual no out"] = b2b(lambda: res(t["X"], t["u"], prepared, t["dN"], lam32, mu32))
    row["step out="] = b2b(lambda: step(t["X"], t["u"], t["v"], t["m"], prepared, t["dN"], lam32, mu32, dt_t, out=s_out))
    row["step no out"] = b2b(lambda: step(t["X"], t["u"], t["v"], t["m"], prepared, t["dN"], lam32, mu32, dt_t))
    row["P1 residual out=, mu a float"] = b2b(lambda: res(t["X"], t["u"], prepared, t["dN"], lam32, 0.5, out=r_out))
    row["NeoHookean out="] = b2b(lambda: nh(F, mu_t, lam_t, out=nh_out))
for k in rounds[0]:
    print(f"{k:28s}", " ".join(f"{rounds[r][k]:7.2f}" for r in rounds))
if os.environ.get('ROWS_ONLY'):
    sys.exit(0)
# components
energy(**e_in); energy(**e_in)
fast = energy._fast
print("fast:", type(fast).__name__, "kept sets:", len(fast.made.kept) if fast.made else None)
h = fast.current_stream()
print("current_stream()", micro(fast.current_stream))
print("stream_capturing(h)", micro(lambda: stream_capturing(h)))
print("torch isCurrentStreamCapturing", micro(torch._C._cuda_isCurrentStreamCapturing))
t3 = tuple(torch.empty(n, device="cuda") for _ in range(3))
shapes = tuple(t.shape for t in t3); addrs = tuple(t.data_ptr() for t in t3)
print("_let_go(3 free)", micro(lambda: output_sets._let_go(t3, shapes, addrs)))
print("_holders(1)", micro(lambda: output_sets._holders(t3[0])))
print("torch_signature(1)", micro(lambda: gpu_calls.torch_signature(t3[0])))
print("untyped_storage(1)", micro(lambda: t3[0].untyped_storage()))
print("getrefcount", micro(lambda: sys.getrefcount(t3[0])))
print("_use_count", micro(lambda: t3[0]._use_count()))
print("data_ptr", micro(lambda: t3[0].data_ptr()))
print("shape", micro(lambda: t3[0].shape))
print("is_contiguous", micro(lambda: t3[0].is_contiguous()))
print("requires_grad", micro(lambda: t3[0].requires_grad))
from irfuse.api.outputs import Outputs
names = fast.outputs._names; lst = list(t3)
print("Outputs()", micro(lambda: Outputs(names, lst)))
print("made.make", micro(lambda: fast.made.make(h)))
print("matches named", micro(lambda: fast.matches((), e_in, None, None)))
for label, fn in (("no out named", lambda: energy(**e_in)), ("out named", lambda: energy(**e_in, out=e_out))):
    fn(); fn()
    pr = cProfile.Profile(); pr.enable()
    for _ in range(5000): fn()
    pr.disable(); torch.cuda.synchronize()
    out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(22)
    print("=== cProfile", label); print("\n".join(out.getvalue().splitlines()[6:34]))
