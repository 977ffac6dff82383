"""tangent_matrix's out= given matrices the caller changed, or of another array library
(run from the project root: `python benchmarks/results/robustness/2026-12-07_solver_inputs_probe/matrix_out.py`)."""
import numpy as np
import scipy.sparse as sp
import torch

import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra

X, conn = box_tetrahedra(2, numbering="random")
C = Connectivity(conn, len(X))
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
res = irfuse.compile("examples/mesh/p1_residual.kas", backend="cpu", dtype="f64")
u = np.zeros_like(X)
args = (res, X, u, C, dN, 1.5, 0.75)
tensors = (res, torch.from_numpy(X), torch.from_numpy(u), C, torch.from_numpy(dN), 1.5, 0.75)
want = irfuse.tangent_matrix(*args, wrt="u")
print("flags:", want.has_sorted_indices, want.has_canonical_format, want.indices.dtype)


def attempt(label, out, call=args):
    try:
        got = irfuse.tangent_matrix(*call, wrt="u", out=out)
        same = abs(got - want).max() == 0 if not isinstance(got, torch.Tensor) else True
        print(f"{label:28s} accepted, the matrix {'right' if same else 'WRONG'}")
    except irfuse.IrfuseError as e:
        print(f"{label:28s} refused: {str(e).splitlines()[0][:150]}")
    except Exception as e:
        print(f"{label:28s} !! {type(e).__name__}: {str(e)[:150]}")


m = irfuse.tangent_matrix(*args, wrt="u")
m.indices = m.indices[::-1].copy()
attempt("indices replaced", m)
m = irfuse.tangent_matrix(*args, wrt="u")
m.indices[:] = m.indices[::-1].copy()
attempt("indices written in place", m)
m = irfuse.tangent_matrix(*args, wrt="u")
m.eliminate_zeros()
attempt("zeros eliminated", m)
attempt("a csr_array of it", sp.csr_array(irfuse.tangent_matrix(*args, wrt="u")))
attempt("scipy out, torch call", irfuse.tangent_matrix(*args, wrt="u"), tensors)
attempt("torch out, numpy call", irfuse.tangent_matrix(*tensors, wrt="u"))
attempt("2 * M", 2.0 * irfuse.tangent_matrix(*args, wrt="u"))
m = irfuse.tangent_matrix(*args, wrt="u")
m.resize((90, 90))
attempt("resized", m)
