"""The caller's connectivity written after Connectivity was made (run from the project root; with
PYTHONPATH naming an older tree, that tree's behaviour)."""
import numpy as np, irfuse, torch, os
from irfuse.mesh import Connectivity, box_tetrahedra
print(irfuse.__file__)
X, conn = box_tetrahedra(2)
res = irfuse.compile(os.path.join(os.path.dirname(os.path.dirname(irfuse.__file__)), "examples/mesh/p1_residual.kas"), backend="cpu", dtype="f64")
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
u = np.random.default_rng(0).standard_normal(X.shape)
want = res(X, u, Connectivity(conn, len(X)), dN, 1.5, 0.75).r.copy()
c32 = conn.astype(np.int32)
Connectivity(c32, len(X))
print("an int32 array given: the caller's array writeable afterwards:", c32.flags.writeable)
base = np.concatenate([conn.astype(np.int32), conn.astype(np.int32)])
C2 = Connectivity(base[:len(conn)], len(X))
base[:len(conn)] = np.roll(base[:len(conn)], 1, axis=0)   # the caller's buffer used again
print("a view's buffer written afterwards: |r - r_before| =", np.abs(res(X, u, C2, dN, 1.5, 0.75).r - want).max())
t = torch.from_numpy(conn.astype(np.int32))
C3 = Connectivity(t, len(X)); t.zero_()
print("a CPU tensor zeroed afterwards: |r - r_before| =", np.abs(res(X, u, C3, dN, 1.5, 0.75).r - want).max())
