"""A mesh call made again after the caller wrote its plain-array connectivity (a node number past
the nodes, then a valid change), scatter="ordered" and "atomic", with out= and without (run from
the project root; with PYTHONPATH naming an older tree from another folder, that tree)."""
import numpy as np, irfuse
from irfuse.mesh import box_tetrahedra
X, conn = box_tetrahedra(2)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
u = np.random.default_rng(0).standard_normal(X.shape)
res = irfuse.compile("examples/mesh/p1_residual.kas", backend="cpu", dtype="f64")
for scatter in ("ordered", "atomic"):
    for use_out in (False, True):
        c = conn.astype(np.int32).copy()
        out = {"out": {"r": np.zeros_like(X)}} if use_out else {}
        for _ in range(3):
            res(X, u, c, dN, 1.5, 0.75, scatter=scatter, **out)
        c[3, 1] = 10**6
        try:
            res(X, u, c, dN, 1.5, 0.75, scatter=scatter, **out); print(scatter, use_out, "bad node ACCEPTED")
        except irfuse.UsageError as e: print(scatter, use_out, "refused:", str(e).splitlines()[0][:100])
        c[3] = conn[5]
        r2 = np.array(res(X, u, c, dN, 1.5, 0.75, scatter=scatter, **out).r)
        ref = np.array(res(X, u, c.copy(), dN, 1.5, 0.75, scatter=scatter).r)
        print(scatter, use_out, "changed conn honoured:", np.abs(r2 - ref).max())
