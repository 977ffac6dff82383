"""Ad hoc: where the host time of an API call on the fast path goes (SyncTest, torch tensors, n =
1024): the whole call, its argument check (matches), the tensors' signatures, the current-stream
read, the launch (InPlaceRun, CudaGraph), a bare PyCUDA prepared launch; microseconds each."""
import timeit
import torch
import irfuse

prog = irfuse.compile("examples/synctest.kas", backend="cuda")
a = torch.rand(1024, 3, 3, device="cuda")
f = torch.empty_like(a)
for _ in range(3):
    prog(a, out=f)
torch.cuda.synchronize()
fast = prog._fast
run = fast.graph
parts = {
    "prog(a, out=f)": lambda: prog(a, out=f),
    "fast.matches": lambda: fast.matches((a, f)[:1], {}, f, None),
    "signature(a)": lambda: fast.signature(a),
    "current_stream()": fast.current_stream,
    "fast.launch()": fast.launch,
    "InPlaceRun.launch_on(0)": lambda: run.launch_on(0),
    "CudaGraph.launch_on(0)": lambda: run.graph.launch_on(0),
}
for rnd in range(3):
    for name, fn in parts.items():
        t = min(timeit.repeat(fn, number=2000, repeat=5)) / 2000 * 1e6
        torch.cuda.synchronize()
        print(rnd, f"{name:28s} {t:6.2f} us", flush=True)
