"""What the passes read of the module's attributes: its element type (`kas.element_type`)
and its global arrays' layout (`kas.layout`)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from irfuse.diagnostics import CompileError
from irfuse.dialects.element_types import module_element_type
from irfuse.dialects.layouts import module_layout


def itemsize_of(module: ModuleOp) -> int:
    """Bytes per word of the module's values; a bad attribute is a located error, not a crash."""
    try:
        return module_element_type(module).itemsize
    except VerifyException as e:
        raise CompileError(str(e)) from None


def layout_of(module: ModuleOp) -> str:
    """The layout of the module's global arrays; a bad attribute is a clear error, not a crash."""
    try:
        return module_layout(module)
    except VerifyException as e:
        raise CompileError(str(e)) from None
