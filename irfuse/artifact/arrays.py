"""How a batch lies in memory and what its words are: the arrays' layouts (array of
structures, structure of arrays, strided views in words) and the element types. Plain data
and shape arithmetic, shared by the compiler (the dialects' module attributes name these)
and the runtime, which needs nothing else to shape buffers and bind arguments.

- `aos`, array of structures: shaped `(N, *value shape)`, element after element; word k
  of element e at `e*size + k`;
- `soa`, structure of arrays: shaped `(*value shape, N)`, the batch axis last; word k of
  element e at `k*N + e`, every word a contiguous run over the batch;
- a strided view: its strides in words, batch axis first then the value's axes (an
  output's name prefixed `OUTPUT_PREFIX` where strides are listed by argument: a program
  may return a value under an input's name).
"""

from __future__ import annotations

import numpy as np

from irfuse.artifact.records import record

AOS, SOA = "aos", "soa"
LAYOUTS = (AOS, SOA)
OUTPUT_PREFIX = "out."


def check_layout(name: object) -> str:
    """`name` if it is a layout; ValueError naming the choices otherwise."""
    if name not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got '{name}'")
    return name  # type: ignore[return-value]


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


# --- element types ---------------------------------------------------------------------


@record(frozen=True)
class ElementType:
    name: str  # as written on the command line and in pass options: f32, f64
    itemsize: int
    numpy: type
    c_type: str
    tolerance: float  # relative error per entry the verification allows beyond rounding (verification)

    @property
    def c_prelude(self) -> str:
        """What generated source puts before the prelude: real_t is float unless defined."""
        return "" if self.c_type == "float" else f"#define IRFUSE_REAL {self.c_type}\n"

    def beyond_range(self, numbers) -> str | None:
        """The first of finite `numbers` this type rounds to infinity, spelled with the type's
        range ("1e+39, beyond the float32 range (largest 3.4028235e+38)"), or None: a number a
        program holds as a literal (a `kas.constant`, a fixed `constants=` value) must fit it."""
        t = np.dtype(self.numpy)
        with np.errstate(over="ignore"):
            for v in numbers:
                if np.isinf(t.type(v)) and not np.isinf(v):
                    return f"{v!r}, beyond the {t.name} range (largest {float(np.finfo(t).max):.8g})"
        return None


F32 = ElementType("f32", 4, np.float32, "float", 1e-4)
F64 = ElementType("f64", 8, np.float64, "double", 1e-10)
ELEMENT_TYPES: dict[str, ElementType] = {"f32": F32, "f64": F64}


def element_type(name: str) -> ElementType:
    """The element type called `name` (f32, f64); ValueError naming the choices otherwise."""
    try:
        return ELEMENT_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"element type must be one of {', '.join(ELEMENT_TYPES)}, got '{name}'") from None
