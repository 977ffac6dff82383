"""The same for a program of passes (examples/mesh/explicit_step.kas)."""
import numpy as np, irfuse
from irfuse.mesh import box_tetrahedra, Connectivity
X, conn = box_tetrahedra(2)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
u = np.random.default_rng(0).standard_normal(X.shape) * 1e-3
v = np.zeros_like(X); mass = np.ones(len(X))
step = irfuse.compile("examples/mesh/explicit_step.kas", backend="cpu", dtype="f64")
print(step.inputs, step.outputs)
for scatter in ("ordered", "atomic"):
    c = conn.astype(np.int32).copy()
    for _ in range(3):
        step(X, u, v, mass, c, dN, 1.5, 0.75, 1e-3, scatter=scatter)
    c[3, 1] = 10**6
    try:
        step(X, u, v, mass, c, dN, 1.5, 0.75, 1e-3, scatter=scatter); print(scatter, "bad node ACCEPTED", flush=True)
    except irfuse.UsageError as e: print(scatter, "refused:", str(e).splitlines()[0][:100], flush=True)
    c[3] = conn[5]
    a = step(X, u, v, mass, c, dN, 1.5, 0.75, 1e-3, scatter=scatter)
    b = step(X, u, v, mass, c.copy(), dN, 1.5, 0.75, 1e-3, scatter=scatter)
    print(scatter, "changed conn honoured:", max(np.abs(np.asarray(a[k]) - np.asarray(b[k])).max() for k in step.outputs), flush=True)
