"""An xDSL context with irfuse's dialects, and module text in and out."""

from __future__ import annotations

from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

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


def parse_module(text: str, name: str = "<plan>") -> ModuleOp:
    return Parser(make_context(), text, name).parse_module()
