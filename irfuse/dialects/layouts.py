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
