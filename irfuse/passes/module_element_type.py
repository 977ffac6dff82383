"""What the passes read of the module's element type (`kas.element_type`)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from irfuse.diagnostics import CompileError
from irfuse.dialects.element_types import module_element_type


def itemsize_of(module: ModuleOp) -> int:
    """Bytes per word of the module's values; a bad attribute is a located error, not a crash."""
    try:
        return module_element_type(module).itemsize
    except VerifyException as e:
        raise CompileError(str(e)) from None
