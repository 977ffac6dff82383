"""The base of irfuse's ops: a verification error knows where the failing op is.

xDSL's `VerifyException` carries a message only; an op that fails verification attaches its
source location (`FileLineColLoc`: the KAS statement it came from, or a `loc(...)` written in
the IR) to the exception, so that the tools print `file:line:col: error: ...` as they do for
the frontend's errors. The innermost failing op decides; ops around it leave it alone.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException


class LocatedOperation(IRDLOperation):
    def verify(self, verify_nested_ops: bool = True) -> None:
        try:
            super().verify(verify_nested_ops)
        except VerifyException as e:
            if not getattr(e, "located", False):
                e.located = True  # type: ignore[attr-defined]
                loc = self.location
                e.location = loc if isinstance(loc, FileLineColLoc) else None  # type: ignore[attr-defined]
            raise


def location_of(e: BaseException) -> FileLineColLoc | None:
    """The source location of the op whose verification raised `e`, when it has one."""
    return getattr(e, "location", None)
