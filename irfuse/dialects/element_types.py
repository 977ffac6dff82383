"""The module attribute that carries a program's element type.

Every value of a batch is an array of one floating-point type. The type is part
of the IR: the module attribute `kas.element_type` (`f32` or `f64`, float32 when
absent), which the passes that count bytes and the emitter read. The table of types (size,
NumPy type, C spelling, the verification's tolerance) is `irfuse.artifact.arrays`, which the
runtime reads too; this module maps them to the IR's attributes.
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

from irfuse.artifact.arrays import ELEMENT_TYPES, F32, F64, ElementType, element_type  # noqa: F401

ELEMENT_TYPE_ATTR = "kas.element_type"

# The IR's spelling of each element type (the `kas.element_type` module attribute).
_ATTRS: dict[str, Attribute] = {"f32": Float32Type(), "f64": Float64Type()}


def module_element_type(module: ModuleOp) -> ElementType:
    """The element type a module's values have (float32 unless `kas.element_type` says otherwise)."""
    attr = module.attributes.get(ELEMENT_TYPE_ATTR)
    if attr is None:
        return F32
    for t in ELEMENT_TYPES.values():
        if attr == _ATTRS[t.name]:
            return t
    raise VerifyException(f"module attribute {ELEMENT_TYPE_ATTR} must be f32 or f64, got {attr}")


def set_module_element_type(module: ModuleOp, t: ElementType) -> None:
    module.attributes[ELEMENT_TYPE_ATTR] = _ATTRS[t.name]
