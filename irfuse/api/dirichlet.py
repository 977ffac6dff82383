"""Dirichlet conditions as the solvers' entry points take them: `fixed=` of
`irfuse.linear_operator`, `irfuse.tangent_matrix` and `irfuse.diagonal` is read here, once
for the three, so that one `fixed` gives the operator, the matrix and the diagonal of the
same problem.

`fixed` is either a boolean array shaped as `wrt` (True at a fixed component), or flat as
`wrt.reshape(-1)`, or the flat indices of the fixed components (component i of node n is
`n * D + i`, the numbering of `wrt.reshape(-1)`, of a matrix's rows and of scikit-fem's `D=`
after its nodal permutation), each as a NumPy array, a list or tuple, a PyTorch tensor or a
CuPy array. A boolean array stays where it is (a device mask is used on its device); indices
are read on the host to be checked (a device tensor of indices is copied there once: a
synchronisation, which a boolean mask avoids) and made a NumPy mask. Anything else, a mask of
another shape, an index outside `wrt`, whole numbers that read as a mask (shaped as `wrt`, or a 0
or 1 at every component) or as (node, component) pairs, is refused by name.
"""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError


def host_values(a) -> np.ndarray:
    """`a` (a NumPy array, a list or tuple, a PyTorch tensor on any device, a CuPy array) as a
    NumPy array on the host."""
    family = type(a).__module__.split(".")[0]
    if family == "torch":
        return a.detach().cpu().numpy()
    if family == "cupy":
        return a.get()
    return np.asarray(a)


def fixed_mask(fixed, shape: tuple, wrt: str, who: str):
    """`fixed` (see the module) as a boolean array shaped `shape` (NumPy, or a device mask as
    given), or None where `fixed` is None."""
    if fixed is None:
        return None
    shape = tuple(int(s) for s in shape)
    size = int(np.prod(shape))
    forms = (f"a boolean array shaped as '{wrt}' {shape} (True at a fixed component) or the flat indices of its "
             f"fixed components (whole numbers in [0, {size}))")
    if not (hasattr(fixed, "dtype") and hasattr(fixed, "shape")) and not isinstance(fixed, (list, tuple)):
        raise UsageError(f"{who}: fixed= is {forms}, not a {type(fixed).__name__}")
    if type(fixed).__module__.split(".")[0] == "scipy":  # (a sparse matrix: its `dtype` and `shape` read as an array's)
        raise UsageError(f"{who}: fixed= is {forms}, not a SciPy {type(fixed).__name__} (give its dense array "
                         "or its indices)")
    if isinstance(fixed, (list, tuple)):
        try:
            fixed = np.asarray(fixed)
        except ValueError:  # (a ragged list)
            raise UsageError(f"{who}: fixed= is {forms}; this list is ragged") from None
    dtype = str(fixed.dtype)
    given = tuple(int(s) for s in fixed.shape)
    if dtype.endswith("bool"):
        if given == shape:
            return fixed
        if given == (size,):
            return fixed.reshape(shape)
        raise UsageError(f"{who}: fixed= is shaped {given}; '{wrt}' is {shape} (a mask is shaped as '{wrt}' or flat)")
    values = host_values(fixed)
    flat = values.reshape(-1)
    if flat.size and flat.dtype.kind not in "iu":
        raise UsageError(f"{who}: fixed= is {forms}, not an array of {flat.dtype} values")
    # Indices are a list: an array of whole numbers shaped as `wrt` (a mask given as 0s and
    # 1s) or of pairs (`np.argwhere` of a mask: (node, component) rows) would be read as flat
    # indices and fix other components, so they are refused (a column, `torch.nonzero` of a
    # flat mask, is a list).
    if values.ndim > 1 and values.shape[1:] != (1,):
        raise UsageError(f"{who}: fixed= is an array of {flat.dtype} values shaped {given}; indices are the flat "
                         f"indices of the fixed components, a list (n * {shape[-1] if shape else 1} + i for "
                         f"component i of node n), and a mask is boolean (fixed.astype(bool))")
    if size > 2 and flat.size == size and not (flat > 1).any():
        raise UsageError(f"{who}: fixed= holds {size} {flat.dtype} values, each 0 or 1: a mask given as whole "
                         f"numbers (a mask is boolean: fixed.astype(bool)), not indices")
    outside = np.flatnonzero((flat < 0) | (flat >= size))
    if len(outside):
        raise UsageError(f"{who}: fixed= lists components of '{wrt}' as whole numbers in [0, {size}); entry "
                         f"{int(outside[0])} is {flat[outside[0]]}")
    flat = flat.astype(np.int64, copy=False)
    mask = np.zeros(size, bool)
    mask[flat] = True
    return mask.reshape(shape)
