"""A program's derivative at fixed inputs as the linear operator solvers take (the sparse
matrix over a mesh's nodes is `irfuse.api.tangents`).

`linear_operator(program, *arrays, wrt="u", of="r", fixed=None, **named)` is the map
v -> d of / d wrt . v at the given inputs (a tangent of `wrt` in, the tangent of output `of`
out, both flattened), computed by the program's forward derivative (`irfuse.jvp`, compiled
once with the program's options) at every product: the matrix is never formed. It comes in
the family of the arrays: a `scipy.sparse.linalg.LinearOperator` for NumPy arrays (and
PyTorch CPU tensors, which run on the host as NumPy arrays), a
`cupyx.scipy.sparse.linalg.LinearOperator` for CuPy arrays, and for PyTorch CUDA tensors a
`TorchOperator` (a callable with `shape`, `dtype`, `matvec`, `rmatvec` and `T`), so that the
Krylov solvers of those libraries (CG, GMRES, MINRES) run on it unchanged. The transpose's
product (`rmatvec`: LSQR, LSMR, BiCG) is the program's reverse derivative (`irfuse.vjp`,
compiled at the first such product), the cotangents of the outputs other than `of` 0.

Dirichlet conditions: `fixed`, a boolean array shaped as `wrt` (True where a component is
fixed; or the flat indices of the fixed components: `api.dirichlet`, which `tangent_matrix`
and `diagonal` read alike), makes the operator the identity on the fixed components and zero
between them and the free ones: (A v)[free] = J[free, free] v[free], (A v)[fixed] =
v[fixed]. A solve for the free components with a right-hand side whose fixed entries hold the
prescribed values g (and whose free entries have the prescribed values' contribution
J[free, fixed] g subtracted, which the caller computes) gives them exactly.
"""

from __future__ import annotations

import math

import numpy as np

from irfuse.api.arguments import bind_inputs
from irfuse.api.device_arrays import device_array
from irfuse.api.dirichlet import fixed_mask, host_values
from irfuse.diagnostics import UsageError


def linear_operator(program, *arrays, wrt: str, of: str | None = None, fixed=None, nodes: int | None = None,
                    **named):
    """The forward derivative of compiled `program` at these inputs, d `of` / d `wrt`, as a
    linear operator in the arrays' family (see the module). `of`: the output (default: the
    program's only output). `fixed`: the components of `wrt` held fixed (Dirichlet)."""
    from irfuse.api import Program, StagedProgram, jvp, vjp

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
    if not isinstance(of, str) or of not in program.outputs:
        raise UsageError(f"linear_operator: '{of}' is not an output of {program.name} ({', '.join(program.outputs)})")
    bound = bind_inputs(program.inputs, arrays, named, program)
    x = bound[wrt]
    derivative = jvp(program, wrt=wrt, with_outputs=False)  # (the tangents only)
    options = {} if nodes is None else {"nodes": nodes}
    values = program(**bound, **options)
    family, dtype = _family(x), np.dtype(program.dtype)
    # (the other outputs' cotangents of a transposed product: zeros of their own, made now)
    others = {y: _vector_like(family, values[y], dtype) for y in program.outputs if y != of}
    shape_out = tuple(np.shape(values[of]))
    shape_in = tuple(np.shape(x))
    n_in, n_out = int(np.prod(shape_in)), int(np.prod(shape_out))
    mask = _on_side_of(family, x, fixed_mask(fixed, shape_in, wrt, "linear_operator"))
    if mask is not None and n_in != n_out:
        raise UsageError(f"linear_operator: fixed= makes a square operator; d{of}/d{wrt} is {n_out} x {n_in}")

    arguments, tangent, result = {**bound, **options}, "d" + wrt, "d" + of  # (made once: a product's host path is short)

    def forward(direction):
        return derivative(**arguments, **{tangent: direction})[result]

    reverse: list = []  # the reverse derivative, compiled at the first transposed product

    def backward(cotangent):
        if not reverse:
            reverse.append(vjp(program, wrt=wrt, with_outputs=False))
        given = {"bar_" + y: z for y, z in others.items()}
        return reverse[0](**bound, **given, **{"bar_" + of: cotangent}, **options)["bar_" + wrt]

    apply = _product(family, forward, _vector_like(family, x, dtype), n_out, mask, "a product")
    apply_t = _product(family, backward, _vector_like(family, values[of], dtype), n_in, mask, "a transposed product")
    if family == "numpy":
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator((n_out, n_in), matvec=_host_vector(apply, dtype),
                              rmatvec=_host_vector(apply_t, dtype), dtype=dtype)
    if family == "cupy":
        from cupyx.scipy.sparse.linalg import LinearOperator as CupyOperator

        return CupyOperator((n_out, n_in), matvec=lambda v: apply(v.astype(dtype, copy=False)),
                            rmatvec=lambda v: apply_t(v.astype(dtype, copy=False)), dtype=dtype)
    return TorchOperator((n_out, n_in), dtype, apply, apply_t)


def _product(family: str, derivative, held, n_out: int, mask, what: str):
    """v -> the derivative's product with v (a vector of as many values as `held`, the
    operator's own array the derivative takes, or shaped as it), flat, with the Dirichlet rows
    and columns of `mask` (the identity there)."""
    shape = tuple(held.shape)
    size = math.prod(shape)
    flat = held.reshape(-1)  # (a view of `held`: a flat vector is copied in without a reshape)

    def apply(v):
        given = tuple(v.shape)
        if math.prod(given) != size:
            raise UsageError(f"linear_operator: {what} takes a vector of {size} values, not one shaped {given}")
        # The vector is copied into an array of the operator's own, so that every product
        # calls the derivative with the very same arguments: its kept run is replayed (a
        # graph on the GPU) instead of bound and checked again (217 us a product on an H200
        # for the P1 tangent on 1.57 M tets, 17 us a call once kept; benchmarks/NOTES.md).
        _copy_into(family, flat, v if len(given) == 1 else v.reshape(-1))
        if mask is not None:
            _zero_where(family, held, mask)
        out = derivative(held).reshape(-1)
        if mask is not None:
            out = _where(family, mask.reshape(-1), v.reshape(-1), out)
        return out.reshape((n_out, 1)) if len(given) == 2 and given[1] == 1 else out

    return apply


def _host_vector(apply, dtype):
    """`apply` for SciPy: the vector as a contiguous array of the operator's type; a complex
    one by its real and imaginary parts (the operator is real)."""
    def product(v):
        v = np.asarray(v)
        if v.dtype.kind == "c":
            real = apply(np.ascontiguousarray(v.real, dtype=dtype)).copy()
            return real + 1j * apply(np.ascontiguousarray(v.imag, dtype=dtype))
        return apply(np.ascontiguousarray(v, dtype=dtype))

    return product


class TorchOperator:
    """A linear operator on PyTorch tensors (vectors of `shape[1]` values, or columns of them):
    `shape`, `dtype`, `matvec(v)` (also by calling it and by `@`), `rmatvec(w)` (the
    transpose's product, by the program's reverse derivative, compiled at the first) and `T`
    (the transposed operator)."""

    def __init__(self, shape: tuple[int, int], dtype, apply, apply_t):
        self.shape, self.dtype, self._apply, self._apply_t = shape, dtype, apply, apply_t

    def matvec(self, v):
        return self._apply(v)

    __call__ = matvec

    def __matmul__(self, v):
        return self._apply(v)

    def rmatvec(self, w):
        return self._apply_t(w)

    @property
    def T(self) -> "TorchOperator":
        return TorchOperator((self.shape[1], self.shape[0]), self.dtype, self._apply_t, self._apply)


def _vector_like(family: str, a, dtype):
    """Zeros shaped as `a` (a program's input or output) of the program's type `dtype`, in the
    operator's family, where `a` lives."""
    if family == "torch":
        import torch

        return torch.zeros(tuple(np.shape(a)), dtype=getattr(torch, dtype.name),
                           device=a.device if isinstance(a, torch.Tensor) else None)
    if family == "cupy":
        import cupy

        return cupy.zeros(tuple(np.shape(a)), dtype)
    return np.zeros(tuple(np.shape(a)), dtype)


def _family(a) -> str:
    d = device_array(a)
    if d is None:
        return "numpy"
    return "cupy" if d.family == "cupy" else "torch" if d.family == "torch" else "numpy"


def _on_side_of(family: str, x, mask):
    """The mask where `x` lives (a host mask next to device arrays is copied there once, not
    at every product)."""
    if mask is None or family == "numpy":
        return None if mask is None else host_values(mask)
    if family == "torch":
        import torch

        return torch.as_tensor(mask, device=x.device)
    import cupy

    return cupy.asarray(mask) if type(mask).__module__.split(".")[0] in ("cupy", "numpy") else cupy.from_dlpack(mask)


def _zero_where(family: str, a, mask) -> None:
    """a[mask] = 0 in place, without the host step a boolean index costs on a device (the
    count of selected entries read back: a synchronisation at every product, and no capture
    into a CUDA graph)."""
    if family == "torch":
        a.masked_fill_(mask, 0)
    elif family == "cupy":
        import cupy

        cupy.copyto(a, 0, where=mask)
    else:
        a[mask] = 0


def _copy_into(family: str, target, a) -> None:
    if family == "torch":
        target.copy_(a)
    elif family == "cupy":
        target[...] = a
    else:
        np.copyto(target, a)


def _where(family: str, mask, a, b):
    if family == "torch":
        import torch

        return torch.where(mask, a, b) if isinstance(a, torch.Tensor) else torch.where(
            mask, torch.as_tensor(a, dtype=b.dtype, device=b.device), b)
    if family == "cupy":
        import cupy

        return cupy.where(mask, a, b)
    return np.where(mask, a, b)
