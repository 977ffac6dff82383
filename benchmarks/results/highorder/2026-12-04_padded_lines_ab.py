"""The padded-lines probe on the GPU (`2026-12-04_padded_lines.patch` applied to the working
tree): one bake-off cell compiled with its tables fixed, without (`plain`) and with
(`IRFUSE_PROBE_PAD=1`, `pad`) the line padding, timed 3 x 20 calls back to back with `out=`
(CUDA events) on 32,768 elements of random float64 values, its output saved to $OUT/MODE.npy
so that the two can be compared bit for bit. From the project root on the GPU machine:

    IRFUSE_CACHE_DIR=/tmp/ca python3 THIS plain bk3 6 compile & \
    IRFUSE_CACHE_DIR=/tmp/cb IRFUSE_PROBE_PAD=1 python3 THIS pad bk3 6 compile; wait
    IRFUSE_CACHE_DIR=/tmp/ca python3 THIS plain bk3 6
    IRFUSE_CACHE_DIR=/tmp/cb IRFUSE_PROBE_PAD=1 python3 THIS pad bk3 6
    python3 -c "import numpy as np; print(np.array_equal(np.load('$OUT/plain.npy'), np.load('$OUT/pad.npy')))"

Then the bake-off's cells (main's package as the head; the head has no probe, so the variable
changes the working tree's runs alone):

    IRFUSE_PROBE_PAD=1 HEAD=<main's irfuse> ORDERS=6,7 KINDS=bp1,bp3,bk3 TAG=<date>_padded_lines \
        ARGS="--tables constants" OUT=$OUT bash benchmarks/bakeoff_ab.sh
"""
import os, sys, time
sys.path.insert(0, "tests"); sys.path.insert(0, "examples/highorder")
import numpy as np
mode, kind, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
import irfuse, operators, highorder_reference as ref
q = p + 2
B, D, _ = ref.lagrange_tables(p, q)
consts = {"B": B} if kind.endswith("1") else {"B": B, "D": D}
t0 = time.perf_counter()
prog = irfuse.compile(getattr(operators, f"{kind}_source")(p, q), backend="cuda", dtype="f64",
                      filename=f"{kind}_p{p}.kas", constants=consts)
print(mode, "compile", round(time.perf_counter() - t0, 2), "s", flush=True)
if sys.argv[4:] == ["compile"]:
    sys.exit(0)
import torch
n = 32768
g = torch.Generator(device="cuda").manual_seed(0)
args = {name: torch.randn((n, *prog.shapes[name]), generator=g, device="cuda", dtype=torch.float64)
        for name in prog.inputs}
out = prog(**args)[prog.outputs[0]]
outs = {prog.outputs[0]: out}
for _ in range(3):
    prog(**args, out=outs)
torch.cuda.synchronize()
times = []
for r in range(3):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        prog(**args, out=outs)
    b.record(); torch.cuda.synchronize()
    times.append(a.elapsed_time(b) / 20)
print(mode, kind, p, "ms a call", [round(t, 4) for t in times], flush=True)
np.save(f"{os.environ['OUT']}/{mode}.npy", out.cpu().numpy())
