"""A program's derivative at fixed inputs as the linear operator solvers take, and as the
sparse matrix over a mesh's nodes (`tangent_matrix`).

`linear_operator(program, *arrays, wrt="u", of="r", fixed=None, **named)` is the map
v -> d of / d wrt . v at the given inputs (a tangent of `wrt` in, the tangent of output `of`
out, both flattened), computed by the program's forward derivative (`irfuse.jvp`, compiled
once with the program's options) at every product: the matrix is never formed. It comes in
the family of the arrays: a `scipy.sparse.linalg.LinearOperator` for NumPy arrays, a
`cupyx.scipy.sparse.linalg.LinearOperator` for CuPy arrays, and for PyTorch tensors a
`TorchOperator` (a callable with `shape`, `dtype` and `matvec` on 1-D tensors), so that the
Krylov solvers of those libraries (CG, GMRES, MINRES) run on it unchanged.

Dirichlet conditions: `fixed`, a boolean array shaped as `wrt` (True where a component is
fixed; or the flat indices of the fixed components), makes the operator the identity on the
fixed components and zero between them and the free ones: (A v)[free] = J[free, free]
v[free], (A v)[fixed] = v[fixed]. A solve for the free components with a right-hand side
whose fixed entries hold the prescribed values (and whose free entries have the prescribed
values' contribution J[free, fixed] g subtracted: `rhs_with_fixed`) gives them exactly.
"""

from __future__ import annotations

import numpy as np

from irfuse.api.arguments import bind_inputs
from irfuse.api.device_arrays import device_array
from irfuse.diagnostics import UsageError


def linear_operator(program, *arrays, wrt: str, of: str | None = None, fixed=None, nodes: int | None = None,
                    **named):
    """The forward derivative of compiled `program` at these inputs, d `of` / d `wrt`, as a
    linear operator in the arrays' family (see the module). `of`: the output (default: the
    program's only output). `fixed`: the components of `wrt` held fixed (Dirichlet)."""
    from irfuse.api import Program, StagedProgram, jvp

    if not isinstance(program, (Program, StagedProgram)):
        raise UsageError(f"linear_operator takes a compiled program (irfuse.compile), not a {type(program).__name__}")
    if not isinstance(wrt, str) or wrt not in program.inputs:
        raise UsageError(f"linear_operator: wrt is one input of {program.name} ({', '.join(program.inputs)}), "
                         f"not {wrt!r}")
    if of is None:
        if len(program.outputs) != 1:
            raise UsageError(f"linear_operator: {program.name} has outputs {', '.join(program.outputs)}: name one "
                             "as of=")
        of = program.outputs[0]
    if of not in program.outputs:
        raise UsageError(f"linear_operator: '{of}' is not an output of {program.name} ({', '.join(program.outputs)})")
    bound = bind_inputs(program.inputs, arrays, named, program)
    x = bound[wrt]
    derivative = jvp(program, wrt=wrt, with_outputs=False)  # (the tangents only)
    options = {} if nodes is None else {"nodes": nodes}
    value = program(**bound, **options)[of]
    n_in, n_out = int(np.prod(np.shape(x))), int(np.prod(np.shape(value)))
    mask = _fixed_mask(fixed, np.shape(x), wrt)
    if mask is not None and n_in != n_out:
        raise UsageError(f"linear_operator: fixed= makes a square operator; d{of}/d{wrt} is {n_out} x {n_in}")
    shape_in = tuple(np.shape(x))
    family = _family(x)

    def apply(v):
        direction = v.reshape(shape_in)
        if mask is not None:
            direction = _where(family, mask, 0.0, direction)
        out = derivative(**bound, **{"d" + wrt: direction}, **options)["d" + of]
        out = out.reshape(-1)
        if mask is not None:
            out = _where(family, mask.reshape(-1), v.reshape(-1), out)
        return out

    dtype = np.dtype(program.dtype)
    if family == "numpy":
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator((n_out, n_in), matvec=lambda v: apply(np.ascontiguousarray(v, dtype=dtype)),
                              dtype=dtype)
    if family == "cupy":
        from cupyx.scipy.sparse.linalg import LinearOperator as CupyOperator

        return CupyOperator((n_out, n_in), matvec=lambda v: apply(v.astype(dtype, copy=False)), dtype=dtype)
    return TorchOperator((n_out, n_in), dtype, apply)


class TorchOperator:
    """A linear operator on 1-D PyTorch tensors: `shape`, `dtype`, `matvec(v)` (and calling it)."""

    def __init__(self, shape: tuple[int, int], dtype, apply):
        self.shape, self.dtype, self._apply = shape, dtype, apply

    def matvec(self, v):
        return self._apply(v)

    __call__ = matvec

    def __matmul__(self, v):
        return self._apply(v)


def _fixed_mask(fixed, shape: tuple, wrt: str):
    """`fixed` as a boolean array shaped as `wrt` (on `wrt`'s side: NumPy, CuPy or torch), or None."""
    if fixed is None:
        return None
    d = device_array(fixed)
    if d is None and not hasattr(fixed, "dtype") and not isinstance(fixed, (list, tuple, np.ndarray)):
        raise UsageError(f"linear_operator: fixed= is a boolean array shaped as '{wrt}' or the flat indices of the "
                         f"fixed components, not a {type(fixed).__name__}")
    if str(getattr(fixed, "dtype", "")).endswith("bool"):
        if tuple(fixed.shape) != tuple(shape):
            raise UsageError(f"linear_operator: fixed= is shaped {tuple(fixed.shape)}; '{wrt}' is {tuple(shape)}")
        return fixed
    flat = np.asarray(fixed).reshape(-1)
    size = int(np.prod(shape))
    if flat.dtype.kind not in "iu" or (len(flat) and (flat.min() < 0 or flat.max() >= size)):
        raise UsageError(f"linear_operator: fixed= lists components of '{wrt}' as whole numbers in [0, {size})")
    mask = np.zeros(size, bool)
    mask[flat] = True
    return mask.reshape(shape)


def _family(a) -> str:
    d = device_array(a)
    if d is None:
        return "numpy"
    return "cupy" if d.family == "cupy" else "torch" if d.family == "torch" else "numpy"


def _where(family: str, mask, a, b):
    if family == "torch":
        import torch

        return torch.where(mask, a, b) if isinstance(a, torch.Tensor) else torch.where(
            mask, torch.as_tensor(a, dtype=b.dtype, device=b.device), b)
    if family == "cupy":
        import cupy

        return cupy.where(mask, a, b)
    return np.where(mask, a, b)


def tangent_matrix(program, *arrays, wrt: str, of: str | None = None, fixed=None, **named):
    """The sparse matrix d `of` / d `wrt` of a compiled program over a mesh (NumPy arrays) at
    these inputs: `of` a nodal output made by a scatter, `wrt` a nodal input gathered through
    its connectivity. Each element's block is the per-element Jacobian of the part between the
    gathers and the scatter (`transforms.element_blocks`, compiled with the program's
    options), added over the node pairs in a fixed order (`irfuse.mesh.assembly.assemble`):
    a `scipy.sparse.csr_matrix` of nodes x D rows and columns, numbered node by node, the same
    bits on every run; `fixed` (a boolean array shaped as `wrt`): identity rows and columns
    there."""
    from irfuse.mesh.assembly import assemble

    blocks, conn, nodes = _element_blocks(program, arrays, named, wrt, of, fixed, "tangent_matrix")
    return assemble(blocks, conn, nodes, fixed)


def diagonal(program, *arrays, wrt: str, of: str | None = None, fixed=None, **named):
    """The diagonal of `tangent_matrix` without the matrix (for a Jacobi preconditioner): a
    nodal array shaped as `wrt`, each entry the sum of its elements' blocks' diagonal entries
    in the scatter's fixed order (`irfuse.mesh.scatter_add`); 1 at `fixed` components."""
    from irfuse.mesh import scatter_add

    blocks, conn, nodes = _element_blocks(program, arrays, named, wrt, of, fixed, "diagonal")
    k = blocks.shape[1]
    own = blocks[:, np.arange(k), :, np.arange(k), :]  # (K, E, D, D): each node's own block
    rows = np.diagonal(own, axis1=2, axis2=3).transpose(1, 0, 2)  # (E, K, D)
    out = scatter_add(np.ascontiguousarray(rows), conn, nodes)
    return out if fixed is None else np.where(np.asarray(fixed, bool), 1.0, out)


def _element_blocks(program, arrays: tuple, named: dict, wrt: str, of: str | None, fixed, who: str):
    """(each element's block of d of / d wrt (E, K, D, K, D), the scatter's connectivity, the
    number of nodes) of a compiled program over a mesh at these NumPy inputs."""
    from irfuse.api import Program, compile, compiled_options
    from irfuse.driver.front import element_jacobian
    from irfuse.mesh import Connectivity, check_connectivity

    if not isinstance(program, Program):
        raise UsageError(f"{who} takes a compiled program over a mesh (irfuse.compile), not a "
                         f"{type(program).__name__}")
    if of is None:
        if len(program.outputs) != 1:
            raise UsageError(f"{who}: {program.name} has outputs {', '.join(program.outputs)}: name one as of=")
        of = program.outputs[0]
    if not isinstance(wrt, str) or wrt not in program.nodal or wrt not in program.inputs:
        raise UsageError(f"{who}: wrt is a nodal input of {program.name}, not {wrt!r}")
    options = compiled_options(program, who)
    module, gathered, conn_name, out = element_jacobian(options.pop("source"), of, wrt, who)
    blocks_program = compile(module, **options)
    bound = bind_inputs(program.inputs, arrays, named, program)
    if any(device_array(v) is not None for v in bound.values()):
        raise UsageError(f"{who}: the element blocks are added on the host for now: pass NumPy arrays")
    if fixed is not None and tuple(np.shape(fixed)) != tuple(np.shape(bound[wrt])):
        raise UsageError(f"{who}: fixed= is shaped {np.shape(fixed)}; '{wrt}' is {np.shape(bound[wrt])}")
    conns = {name: (v.conn if isinstance(v, Connectivity) else check_connectivity(v, None, f"input '{name}'"))
             for name, v in bound.items() if name in program.index_inputs}
    inputs = {name: np.asarray(bound[nodal])[conns[c]] for name, (nodal, c) in gathered.items()}
    inputs.update({name: bound[name] for name in blocks_program.inputs if name not in inputs})
    blocks = np.asarray(blocks_program(**inputs)[out])
    return blocks, conns[conn_name], len(np.asarray(bound[wrt]))
