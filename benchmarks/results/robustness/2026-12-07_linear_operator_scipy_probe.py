"""Probe: irfuse.linear_operator of the P1 residual (box_tetrahedra(2), the bottom face fixed)
handed to SciPy's LinearOperator algebra and solvers, float64 and float32 programs, against the
dense tangent_matrix: products of vectors, columns, blocks, complex and integer vectors, lists,
strided and Fortran-ordered arrays, transposes, sums, powers, scaled operators, and cg, gmres,
minres, bicgstab, lsqr, eigsh, onenormest, expm_multiply; a wrong size refused.

    python 2026-12-07_linear_operator_scipy_probe.py   (from the project root's parent of examples/)
"""
import numpy as np, irfuse, scipy.linalg, warnings
from scipy.sparse import linalg as sla
from irfuse.mesh import Connectivity, box_tetrahedra
warnings.simplefilter("ignore")
X, conn = box_tetrahedra(2)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
for dtype in ("f64", "f32"):
    residual = irfuse.compile("examples/mesh/p1_residual.kas", backend="cpu", dtype=dtype)
    npdt = np.float64 if dtype == "f64" else np.float32
    fixed = np.zeros(X.shape, bool); fixed[X[:, 2] == 0] = True
    A = irfuse.linear_operator(residual, X.astype(npdt), np.zeros_like(X, dtype=npdt), Connectivity(conn, len(X)), dN.astype(npdt), 1.5, 0.75, wrt="u", fixed=fixed)
    K = irfuse.tangent_matrix(residual, X.astype(npdt), np.zeros_like(X, dtype=npdt), Connectivity(conn, len(X)), dN.astype(npdt), 1.5, 0.75, wrt="u", fixed=fixed).toarray()
    n = A.shape[0]
    rng = np.random.default_rng(0)
    x = rng.random(n); Xm = rng.random((n, 3))
    def t(name, f, want=None):
        try:
            got = f()
            ok = "" if want is None else ("OK" if np.allclose(np.asarray(got), want, rtol=1e-4 if dtype=="f32" else 1e-10, atol=1e-6) else "WRONG")
            print(f"{dtype} {name:28s} {ok} {type(got).__name__} {getattr(got, 'shape', '')} {getattr(got, 'dtype', '')}")
        except Exception as e:
            print(f"{dtype} {name:28s} RAISED {type(e).__name__}: {str(e).splitlines()[0][:150]}")
    t("A @ x", lambda: A @ x, K @ x)
    t("A @ x32", lambda: A @ x.astype(np.float32), K @ x.astype(np.float32))
    t("A.matvec col", lambda: A.matvec(x[:, None]), (K @ x)[:, None])
    t("A @ X (matmat)", lambda: A @ Xm, K @ Xm)
    t("A.matmat", lambda: A.matmat(Xm), K @ Xm)
    t("A.T @ x", lambda: A.T @ x, K.T @ x)
    t("A.H @ x", lambda: A.H @ x, K.T @ x)
    t("A.rmatmat", lambda: A.rmatmat(Xm), K.T @ Xm)
    t("2 * A @ x", lambda: (2 * A) @ x, 2 * K @ x)
    t("(A + A) @ x", lambda: (A + A) @ x, 2 * K @ x)
    t("A @ A @ x", lambda: (A @ A) @ x, K @ K @ x)
    t("A ** 2 @ x", lambda: (A ** 2) @ x, K @ K @ x)
    t("A.dot(x)", lambda: A.dot(x), K @ x)
    t("A @ complex", lambda: A @ (x + 1j * x), K @ (x + 1j*x))
    t("A @ int vec", lambda: A @ np.arange(n), K @ np.arange(n))
    t("A @ list", lambda: A @ list(x), K @ x)
    t("A @ wrong size", lambda: A @ np.ones(n + 1))
    t("A @ 2-D wrong", lambda: A @ np.ones((n + 1, 2)))
    b = K @ x
    t("cg", lambda: sla.cg(A, b, rtol=1e-12, maxiter=2000)[0], x)
    t("gmres", lambda: sla.gmres(A, b, rtol=1e-12, restart=200, maxiter=200)[0], x)
    t("minres", lambda: sla.minres(A, b, rtol=1e-12, maxiter=2000)[0], x)
    t("bicgstab", lambda: sla.bicgstab(A, b, rtol=1e-12, maxiter=2000)[0], x)
    t("lsqr", lambda: sla.lsqr(A, b, atol=1e-14, btol=1e-14, iter_lim=5000)[0], x)
    t("eigsh largest", lambda: np.sort(sla.eigsh(A, k=2, which="LM", tol=1e-10)[0]), np.sort(np.linalg.eigvalsh(K))[-2:])
    t("onenormest <= the norm", lambda: sla.onenormest(A) <= np.abs(K).sum(0).max() * (1 + 1e-5), True)
    t("aslinearoperator", lambda: sla.aslinearoperator(A) @ x, K @ x)
    t("expm_multiply", lambda: sla.expm_multiply(-A * 0.01, x), scipy.linalg.expm(-0.01 * K.astype(float)) @ x)
    t("A.adjoint()", lambda: A.adjoint() @ x, K.T @ x)
    t("A.transpose()", lambda: A.transpose() @ x, K.T @ x)
    t("A @ x F-order 2D", lambda: A @ np.asfortranarray(Xm), K @ Xm)
    t("A @ strided", lambda: A @ np.repeat(x, 2)[::2], K @ x)
