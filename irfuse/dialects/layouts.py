"""Where a batch's words lie in global memory, and the module attribute that says so.

A program's global arrays (its inputs, its outputs and the temporaries between its
kernels) all have one layout, the module attribute `kas.layout` (array of structures
when absent):

- `aos`, array of structures: shaped `(N, *value shape)`, element after element; word k
  of element e at `e*size + k`;
- `soa`, structure of arrays: shaped `(*value shape, N)`, the batch axis last; word k of
  element e at `k*N + e`, every word a contiguous run over the batch.

The kernels are generated for the layout (`fuse.kernel` carries it), the cost model and
the in-kernel passes plan for it, and the runtime shapes buffers by it.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

LAYOUT_ATTR = "kas.layout"


class Layout(StrEnum):
    """How global arrays hold the batch (a kernel's `layout(...)`, `#fuse<layout ...>`)."""

    AOS = "aos"
    SOA = "soa"


AOS, SOA = Layout.AOS.value, Layout.SOA.value
LAYOUTS = tuple(layout.value for layout in Layout)


def check_layout(name: object) -> str:
    """`name` if it is a layout; ValueError naming the choices otherwise."""
    if name not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got '{name}'")
    return name  # type: ignore[return-value]


def module_layout(module: ModuleOp) -> str:
    """The layout of a module's global arrays (`aos` unless `kas.layout` says otherwise)."""
    attr = module.attributes.get(LAYOUT_ATTR)
    if attr is None:
        return AOS
    if isinstance(attr, StringAttr) and attr.data in LAYOUTS:
        return attr.data
    raise VerifyException(f"module attribute {LAYOUT_ATTR} must be \"aos\" or \"soa\", got {attr}")


def set_module_layout(module: ModuleOp, layout: str) -> None:
    if check_layout(layout) == AOS:
        module.attributes.pop(LAYOUT_ATTR, None)  # the default: the IR stays as it always was
    else:
        module.attributes[LAYOUT_ATTR] = StringAttr(layout)


def batch_shape(layout: str, value_shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The shape of a batch of `n` values of `value_shape` in `layout`."""
    return (n, *value_shape) if layout == AOS else (*value_shape, n)


def fits(shape: tuple[int, ...], value_shape: tuple[int, ...], layout: str) -> bool:
    """Whether an array of `shape` is a batch of `value_shape` values in `layout`."""
    if len(shape) != 1 + len(value_shape):
        return False
    return tuple(shape[1:] if layout == AOS else shape[:-1]) == tuple(value_shape)


def batch_length(shape: tuple[int, ...], layout: str) -> int:
    """How many values a batch of `shape` in `layout` holds."""
    return int(shape[0] if layout == AOS else shape[-1])


def describe_batch_shape(layout: str, value_shape: tuple[int, ...]) -> str:
    """`(N, 3, 3)` or `(3, 3, N)`: how an argument must be shaped, for messages."""
    dims = [str(d) for d in value_shape]
    return "(" + ", ".join(["N", *dims] if layout == AOS else [*dims, "N"]) + ")"


def to_aos(a, layout: str):
    """A batch in `layout` as an array of structures: a view, the batch axis moved first."""
    return a if layout == AOS else np.moveaxis(a, -1, 0)


def from_aos(a, layout: str):
    """An array-of-structures batch laid out in `layout`: a new C-contiguous array for `soa`."""
    return a if layout == AOS else np.ascontiguousarray(np.moveaxis(a, 0, -1))


def arrays_to_aos(arrays: dict, layout: str, whole=()) -> dict:
    """`to_aos` of every batch; the arrays named in `whole` (uniform values: no batch axis) as they are."""
    return {k: v if k in whole else to_aos(v, layout) for k, v in arrays.items()}


def arrays_from_aos(arrays: dict, layout: str, whole=()) -> dict:
    """`from_aos` of every batch; the arrays named in `whole` as they are."""
    return {k: v if k in whole else from_aos(v, layout) for k, v in arrays.items()}


# --- strided views -------------------------------------------------------------------------
#
# A program input or output may also be a strided view (a slice of a larger array, a
# transposed value, an element every other row): the module attribute `kas.strides` maps
# its name (an output's prefixed `out.`: a program may return a value under an input's
# name) to its strides in words, batch axis first then the value's axes,
# `{A = "18,3,1", "out.F" = "9,1,3"}`; word (i, j) of element e of A is then at
# `e*18 + i*3 + j` from the view's first word. The kernels are generated for those strides (element by element
# reads and writes); arguments not named keep the module's layout.

STRIDES_ATTR = "kas.strides"
OUTPUT_PREFIX = "out."


def module_strides(module: ModuleOp) -> dict[str, tuple[int, ...]]:
    """The strided arguments of a module: name -> (batch stride, value strides...) in words."""
    from xdsl.dialects.builtin import DictionaryAttr

    attr = module.attributes.get(STRIDES_ATTR)
    if attr is None:
        return {}
    if not isinstance(attr, DictionaryAttr):
        raise VerifyException(f"module attribute {STRIDES_ATTR} must be a dictionary of argument names to "
                              f"strides (\"18,3,1\"), got {attr}")
    out = {}
    for name, value in attr.data.items():
        try:
            if not isinstance(value, StringAttr):
                raise ValueError
            out[name] = tuple(int(s) for s in value.data.split(","))
        except ValueError:
            raise VerifyException(f"{STRIDES_ATTR}: the strides of '{name}' must be whole numbers separated by "
                                  f"commas, got {value}") from None
    return out


def set_module_strides(module: ModuleOp, strides: dict[str, tuple[int, ...]]) -> None:
    from xdsl.dialects.builtin import DictionaryAttr

    if strides:
        module.attributes[STRIDES_ATTR] = DictionaryAttr(
            {name: StringAttr(",".join(str(s) for s in strides[name])) for name in sorted(strides)})
    else:
        module.attributes.pop(STRIDES_ATTR, None)


def natural_strides(layout: str, value_shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The strides in words (batch axis first) of a C-contiguous batch of `n` in `layout`."""
    inner, step = [], 1
    for d in reversed(value_shape):
        inner.append(step)
        step *= d
    inner.reverse()
    if layout == AOS:
        return (step, *inner)
    return (1, *(s * n for s in inner))


def view_strides(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int, layout: str
                 ) -> tuple[int, ...] | None:
    """An array's strides in words, batch axis first (None when the bytes are not whole
    words); `strides` None means C-contiguous. Axes of length 1 take the natural stride
    (any stride addresses them alike)."""
    value_shape = tuple(shape[1:] if layout == AOS else shape[:-1])
    n = batch_length(shape, layout)
    natural = natural_strides(layout, value_shape, n)
    if strides is None:
        return natural
    if any(s % itemsize for s in strides):
        return None
    words = [s // itemsize for s in strides]
    ordered = words if layout == AOS else [words[-1], *words[:-1]]
    dims = [n, *value_shape]
    return tuple(nat if d == 1 else w for w, nat, d in zip(ordered, natural, dims))
