"""Where a batch's words lie in global memory, and the module attribute that says so.

A program's global arrays (its inputs, its outputs and the temporaries between its
kernels) all have one layout, the module attribute `kas.layout` (array of structures
when absent):

- `aos`, array of structures: shaped `(N, *value shape)`, element after element; word k
  of element e at `e*size + k`;
- `soa`, structure of arrays: shaped `(*value shape, N)`, the batch axis last; word k of
  element e at `k*N + e`, every word a contiguous run over the batch.

The kernels are generated for the layout (`fuse.kernel` carries it), the cost model and
the in-kernel passes plan for it, and the runtime shapes buffers by it. The shapes and
strides themselves are plain arithmetic (`irfuse.artifact.arrays`, imported here), which the
runtime uses without the dialects.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from irfuse.artifact.arrays import (AOS, LAYOUTS, OUTPUT_PREFIX, SOA, arrays_from_aos, arrays_to_aos,  # noqa: F401
                                    batch_length, batch_shape, check_layout, describe_batch_shape, fits, from_aos,
                                    natural_strides, to_aos, view_strides)

LAYOUT_ATTR = "kas.layout"


class Layout(StrEnum):
    """How global arrays hold the batch (a kernel's `layout(...)`, `#fuse<layout ...>`)."""

    AOS = "aos"
    SOA = "soa"


assert LAYOUTS == tuple(layout.value for layout in Layout)


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


