"""The mesh examples on the CPU backend: the element loop (`render_cpu_loop`, which now takes
gathers and a scatter's rows) against the kernels' twins (`emulate`, what ran them before),
whole runs on a Morton-ordered box of tetrahedra, float32, medians of alternating runs; the
outputs compared bit for bit.

    python mesh_cpu_ab.py [cubes] [repeat]
"""
import os
import sys
import time

import numpy as np

import irfuse
import irfuse.mesh as mesh
from irfuse.driver.binaries import with_cpu_rendering
from irfuse.runtime.cpu_device import CpuDevice
from irfuse.runtime.executor import Executor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 48
repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 15
X0, conn0 = mesh.box_tetrahedra(cubes, numbering="random", seed=0)
conn, X = mesh.renumber(conn0, *mesh.reorder(conn0, X0, method="morton"), X0)
E, N = conn.shape[0], X.shape[0]
prep = mesh.Connectivity(conn, N)
rng = np.random.default_rng(1)
u = (rng.standard_normal(X.shape) * (0.05 / cubes)).astype(np.float32)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
common = {"X": X.astype(np.float32), "u": u, "conn": prep.conn, "dN": dN, "lam": np.float32(0.5),
          "mu": np.float32(0.3), "rho": np.float32(2.0), "quarter": np.full(4, 0.25, np.float32)}
print(f"{E} tetrahedra, {N} nodes, {os.cpu_count()} cores")
for name in ("neo_hookean_energy.kas", "neo_hookean_residual.kas", "p1_residual.kas", "lumped_mass.kas"):
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", name), backend="cpu")
    art = prog._with_binary()
    runs = {}
    for label, a in (("loop", art), ("twin", with_cpu_rendering(art, "emulate"))):
        ex = Executor(a, CpuDevice(a))
        names = list(prog.inputs)
        inputs = {k: common[k] for k in names}
        rec = ex.prepare(inputs, E, nodes=N, inverses={"conn": prep.inverse})
        rec.replay()
        runs[label] = rec
    times = {k: [] for k in runs}
    for _ in range(repeat):
        for k, rec in runs.items():
            t = time.perf_counter()
            rec.replay()
            times[k].append(time.perf_counter() - t)
    outs = {k: rec.outputs() for k, rec in runs.items()}
    same = all(np.array_equal(outs["loop"][o].view(np.uint32), outs["twin"][o].view(np.uint32)) for o in outs["loop"])
    lo, tw = np.median(times["loop"]) * 1e3, np.median(times["twin"]) * 1e3
    print(f"{name:28s} loop {lo:8.2f} ms  twin {tw:8.2f} ms  {tw / lo:5.2f}x  same bits: {same}")
