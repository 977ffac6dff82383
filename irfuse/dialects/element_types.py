"""Element types of a program's values, and the module attribute that carries it.

Every value of a batch is an array of one floating-point type. The type is part
of the IR: the module attribute `kas.element_type` (`f32` or `f64`, float32 when
absent), which the passes that count bytes and the emitter read. This table is the
one place that maps a type to its size, NumPy type, C spelling and the tolerance
the verification uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

ELEMENT_TYPE_ATTR = "kas.element_type"


@dataclass(frozen=True)
class ElementType:
    name: str  # as written on the command line and in pass options: f32, f64
    itemsize: int
    numpy: type
    c_type: str
    tolerance: float  # relative error per entry the verification allows beyond rounding (runtime.verify)
    attr: Attribute

    @property
    def c_prelude(self) -> str:
        """What generated source puts before the prelude: real_t is float unless defined."""
        return "" if self.c_type == "float" else f"#define IRFUSE_REAL {self.c_type}\n"


F32 = ElementType("f32", 4, np.float32, "float", 1e-4, Float32Type())
F64 = ElementType("f64", 8, np.float64, "double", 1e-10, Float64Type())
ELEMENT_TYPES: dict[str, ElementType] = {"f32": F32, "f64": F64}


def element_type(name: str) -> ElementType:
    """The element type called `name` (f32, f64); ValueError naming the choices otherwise."""
    try:
        return ELEMENT_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"element type must be one of {', '.join(ELEMENT_TYPES)}, got '{name}'") from None


def module_element_type(module: ModuleOp) -> ElementType:
    """The element type a module's values have (float32 unless `kas.element_type` says otherwise)."""
    attr = module.attributes.get(ELEMENT_TYPE_ATTR)
    if attr is None:
        return F32
    for t in ELEMENT_TYPES.values():
        if attr == t.attr:
            return t
    raise VerifyException(f"module attribute {ELEMENT_TYPE_ATTR} must be f32 or f64, got {attr}")


def set_module_element_type(module: ModuleOp, t: ElementType) -> None:
    module.attributes[ELEMENT_TYPE_ATTR] = t.attr
