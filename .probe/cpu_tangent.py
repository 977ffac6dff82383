import time, warnings, numpy as np, irfuse
warnings.simplefilter("ignore")
import irfuse.api.tangents as T
from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder
X, conn = box_tetrahedra(24)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
X = X.astype(np.float32); u = (1e-3*np.random.default_rng(0).standard_normal(X.shape)).astype(np.float32)
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
prog = irfuse.compile("examples/mesh/p1_residual.kas", backend="cpu")
def run(label, force_scatter):
    c = Connectivity(conn, len(X))
    orig = T._rows_assembly
    if force_scatter: T._rows_assembly = lambda *a: None
    try:
        M = irfuse.tangent_matrix(prog, X, u, c, DN, 1.5, 0.75, wrt="u")
        ts = []
        for _ in range(5):
            t = time.perf_counter(); irfuse.tangent_matrix(prog, X, u, c, DN, 1.5, 0.75, wrt="u", out=M); ts.append(time.perf_counter()-t)
        print(label, len(conn), "tets", f"{np.median(ts)*1e3:.1f} ms", M.nnz)
        return M
    finally:
        T._rows_assembly = orig
a = run("owner-computes", False); b = run("scatter", True)
print("max diff", abs(a-b).max() / abs(a).max())
