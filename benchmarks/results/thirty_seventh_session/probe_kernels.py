"""The mesh energy and gradient (or another program of examples/mesh) on the 128^3 Morton
mesh, whole runs timed (medians of 30); under `ncu --print-summary per-kernel`, each
kernel's time and DRAM bytes. OLD=DIR runs the irfuse package found in DIR (an older tree,
`git archive REV irfuse | tar -x -C DIR`) instead of the installed one.

    python probe_kernels.py neo_hookean_energy.kas [energy]   # "energy": without its derivative line
"""
import os, sys
import numpy as np
if os.environ.get("OLD"):
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, os.environ["OLD"])
import irfuse, irfuse.mesh as mesh
from irfuse.runtime.executor import Executor
print(irfuse.__file__)
X0, conn0 = mesh.box_tetrahedra(128, numbering="random", seed=0)
conn, X = mesh.renumber(conn0, *mesh.reorder(conn0, X0, method="morton"), X0)
u = np.random.default_rng(1).standard_normal(X.shape) * (0.05 / 128)
E, N = conn.shape[0], X.shape[0]
path = "examples/mesh/" + sys.argv[1]
src = open(path).read()
if len(sys.argv) > 2:
    src = src.replace("derivative grad of E wrt u;", "")
prog = irfuse.compile(src, backend="cuda", filename=os.path.basename(path))
prep = mesh.Connectivity(conn, N)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
inputs = {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prep.conn, "dN": dN,
          "lam": np.float32(0.5), "mu": np.float32(0.3)}
run = Executor(prog._with_binary(), prog.opened_device()).prepare(inputs, E, nodes=N, inverses={"conn": prep.inverse})
for _ in range(3):
    run.replay()
ts = [run.time_once() for _ in range(30)]
print("median ms", np.median(ts) * 1e3 if np.median(ts) < 1 else np.median(ts))
for k in prog.artifact.kernels[:4]:
    print(k.name, k.by, k.per_thread, k.shared_words, k.arrays, k.grouped if hasattr(k, "grouped") else "")
