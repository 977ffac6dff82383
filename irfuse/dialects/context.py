"""An xDSL context with irfuse's dialects, and module text in and out.

IR text is parsed with each op's place in it as its location (`LocatingParser`), as MLIR's
parser does and as the KAS frontend gives each op its statement's: a verifier's or a pass's
error about an op of an `.mlir` file then names `file:line:col` and shows the line
(`dialects.located`). A `loc(...)` written in the IR is kept. Locations are not printed
(`module_text`), so a module's text, and what keys a cache by it, does not depend on them.
"""

from __future__ import annotations

import bisect
import re
from contextlib import contextmanager
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from irfuse.dialects.fuse import Fuse
from irfuse.dialects.kas import Kas


def make_context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Kas)
    ctx.load_dialect(Fuse)
    return ctx


def module_text(module: ModuleOp) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"


class LocatingParser(Parser):
    """xDSL's parser, giving each op it parses without a `loc(...)` the line and column where
    its text starts (`line_offset`: lines before the text in its file, as a
    `--split-input-file` chunk has)."""

    def __init__(self, ctx: Context, text: str, name: str = "<unknown>", line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.file, self.line_offset = StringAttr(name), line_offset
        # Where each line starts, found once (a span's own `get_location` counts the lines
        # before it at every op: quadratic in a plan of thousands of ops).
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def parse_optional_type(self):
        start = self._current_token.span.start
        with self._refused_as_parse_error(start):
            return super().parse_optional_type()

    def parse_optional_attribute(self):
        start = self._current_token.span.start
        with self._refused_as_parse_error(start):
            return super().parse_optional_attribute()

    @contextmanager
    def _refused_as_parse_error(self, start: int):
        """A type or attribute whose parameters its own verifier refuses (`!kas.matrix<0x3>`)
        raises while it is parsed: its error gets the place it was parsed from as its location
        (`dialects.located.location_of`), so that the file's diagnostic names its line and
        column as a refused op's does."""
        try:
            yield
        except VerifyException as e:
            if getattr(e, "location", None) is None:
                e.location = self._location(start)  # type: ignore[attr-defined]
            raise

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            op.location = self._location(start)
        return op

    def _location(self, start: int) -> FileLineColLoc:
        """The file, line and column of the text's character `start`."""
        line = bisect.bisect_right(self.line_starts, start)
        return FileLineColLoc(self.file, IntAttr(line + self.line_offset), IntAttr(start - self.line_starts[line - 1] + 1))


def parse_module(text: str, name: str = "<plan>", implicit_module: bool = True) -> ModuleOp:
    return LocatingParser(make_context(), text, name).parse_module(implicit_module)
