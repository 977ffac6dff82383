"""KAS programs written again as Python functions (`@irfuse.program`), for the differential
tests of the Python front end: a random KAS program and its Python rendering must be the same
program (`tests/test_python_frontend.py`).

`python_source(kas_text, name)` is the text of a module defining function `name`, traced by
the Python front end: every input a parameter annotated with its type (`irfuse.Uniform`,
`irfuse.Nodal`, `irfuse.Index`, ...), every other variable declared by an annotation in the
order of the KAS declarations, each statement in its Python form (ops as `ops.NAME(...)`,
copies as assignments, comparisons and `and`/`or`/`not` of masks as Python's operators,
`gather`/`scatter`/`where` and the reductions as `irfuse.NAME`, loops as `for _ in range(N)`,
entries as `x[q]`, an array `T x[N]` as the value of N entries it is), each `derivative` line a
decorator; None for a program it has no Python form for."""

from __future__ import annotations

from irfuse.diagnostics import SourceFile
from irfuse.frontend.syntax import (COMPARISONS, COPY, CallExpr, Declaration, Index, Loop, Name, Number, Program, Text,
                                    is_index_type, is_mask_type, parse_program)
from irfuse.frontend.syntax import If as IfStatement

_SYMBOLS = {name: symbol for symbol, name in COMPARISONS.items()}
_MESH = {"gather": "irfuse.gather", "scatter": "irfuse.scatter", "select": "irfuse.where"}
_REDUCTIONS = ("sum", "max", "min")


class NoPythonForm(Exception):
    """The KAS program has something its Python rendering does not write (the message says what)."""


def python_source(kas_text: str, name: str = "rendered") -> str | None:
    """The Python module text of KAS `kas_text` as function `name` (see the module), or None."""
    program = parse_program(SourceFile("<rendered>", kas_text))
    try:
        return _Renderer(program).module(name)
    except NoPythonForm:
        return None


class _Renderer:
    def __init__(self, program: Program):
        self.program = program
        self.types: dict[str, str] = {}
        for d in program.declarations:
            for n in d.names:
                self.types[n.text] = _annotation(d, d.lengths.get(n.text))

    def module(self, name: str) -> str:
        p = self.program
        inputs = [n.text for n in p.inputs]
        lines = ["import irfuse", "from irfuse import ops", ""]
        for d in reversed(p.derivatives):  # (the decorator nearest the function applies first)
            args = [repr(d.mode.text), f"wrt=({', '.join(repr(w.text) for w in d.wrt)},)"]
            if d.prefix is not None:
                args.append(f"prefix={d.prefix.text!r}")
            if d.of is not None:
                args.append(f"of={d.of.text!r}")
            if d.loops is not None:
                args.append(f"loops={d.loops.text!r}")
            lines.append(f"@irfuse.derivative({', '.join(args)})")
        params = ", ".join(f"{v}: {self.types[v]}" for v in inputs)
        lines += ["@irfuse.program", f"def {name}({params}):"]
        body = [f"{v}: {t}" for v, t in self.types.items() if v not in inputs]
        body += self.statements(p.statements)
        body.append("return " + ", ".join(o.text for o in p.outputs))
        return "\n".join(lines + ["    " + line for line in body]) + "\n"

    def statements(self, statements: list, depth: int = 0) -> list[str]:
        out: list[str] = []
        for s in statements:
            if isinstance(s, Loop):
                out.append(f"for {s.index.text if s.index is not None else '_'} in range({s.count}):")
                out += ["    " + line for line in (self.statements(s.body) or ["pass"])]
            elif isinstance(s, IfStatement):
                out.append(f"if {self.condition(s.condition)}:")
                out += ["    " + line for line in (self.statements(s.then) or ["pass"])]
                if s.orelse:
                    out.append("else:")
                    out += ["    " + line for line in self.statements(s.orelse)]
            else:
                out.append(f"{_operand(s.target)} = {self.call(s.op.text, s.args)}")
        return out

    def call(self, op: str, args: list) -> str:
        text = [self.operand(a) for a in args]
        if op == COPY:
            return text[0]
        if op in _SYMBOLS and len(args) == 2:
            return f"({text[0]} {_SYMBOLS[op]} {text[1]})"
        if op in ("and", "or") and len(args) == 2:
            return f"({text[0]} {op} {text[1]})"
        if op == "not" and len(args) == 1:
            return f"(not {text[0]})"
        if op in _MESH:
            return f"{_MESH[op]}({', '.join(text)})"
        if op in _REDUCTIONS and len(args) == 1:
            return f"irfuse.{op}({text[0]})"
        return f"ops.{op}({', '.join(text)})"

    def operand(self, a) -> str:
        if isinstance(a, CallExpr):
            return self.call(a.op.text, a.args)
        return _operand(a)

    def condition(self, c) -> str:
        if c.op is None:
            return self.operand(c.lhs)
        return f"{self.operand(c.lhs)} {c.op} {self.operand(c.rhs)}"


def _operand(a) -> str:
    if isinstance(a, Index):
        return f"{a.name.text}[{_operand(a.index)}]"
    if isinstance(a, Text):
        return repr(a.text)
    if isinstance(a, (Name, Number)):
        return a.text
    raise NoPythonForm(f"an operand {a!r}")


def _annotation(d: Declaration, length: int | None) -> str:
    """A declared variable's annotation: an array of `length` values its stacked value
    (`T x[N]` holds a value shaped (N, *T's shape), as the IR holds it)."""
    if is_index_type(d.type_text):
        return f"irfuse.Index[{d.shape[0] if d.shape else int(d.type_text[5:])}]"
    if length is not None and is_mask_type(d.type_text):
        raise NoPythonForm("an array of masks")
    shape = d.shape if length is None else (length, *d.shape)
    if is_mask_type(d.type_text):
        value = "irfuse.Mask"
    elif not shape:
        value = "irfuse.Scalar"
    else:
        family = {1: "Vector", 2: "Matrix"}.get(len(shape), "Tensor")
        value = f"irfuse.{family}[{', '.join(str(s) for s in shape)}]"
    if d.uniform:
        value = f"irfuse.Uniform[{value}]"
    if d.nodal:
        value = f"irfuse.Nodal[{value}]"
    return value
