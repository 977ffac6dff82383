"""fixed= of tangent_matrix (and so of the operator and the diagonal) given masks and indices of
every form a user might write (run from the project root)."""
import numpy as np, irfuse, scipy.sparse as sp
from irfuse.mesh import Connectivity, box_tetrahedra
X, conn = box_tetrahedra(2)
C = Connectivity(conn, len(X))
res = irfuse.compile("examples/mesh/p1_residual.kas", backend="cpu", dtype="f64")
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
u = np.zeros_like(X)
mask = np.zeros(X.shape, bool); mask[X[:, 2] == 0] = True
def tryit(name, f):
    try:
        r = f(); print(name, "->", type(r).__name__, getattr(r, "shape", None))
        return r
    except Exception as e:
        print(name, "!!", type(e).__name__, str(e)[:300])
Mb = tryit("bool mask", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=mask))
Mi = tryit("int mask", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=mask.astype(int)))
Mi8 = tryit("int8 flat mask", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=mask.astype(np.int8).reshape(-1)))
if Mb is not None and Mi is not None:
    print("int mask same as bool:", (Mb != Mi).nnz == 0)
tryit("empty list", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=[]))
tryit("bool list", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=mask.tolist()))
tryit("scalar True", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=True))
tryit("np.bool_", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.True_))
tryit("0-d int", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.int64(3)))
tryit("2-D idx", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.array([[0, 1], [2, 3]])))
tryit("sparse mask", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=sp.csr_matrix(mask)))
tryit("object arr", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.array([0, None])))
tryit("uint64 big", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.array([2**63+5], np.uint64)))
tryit("set", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed={1, 2}))
tryit("range", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=range(3)))
tryit("masked array", lambda: irfuse.tangent_matrix(res, X, u, C, dN, 1.5, 0.75, wrt="u", fixed=np.ma.array(mask, mask=mask)))
