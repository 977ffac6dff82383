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

import functools
import re

from irfuse.diagnostics import SourceFile
from irfuse.frontend.syntax import (COMPARISONS, COPY, CallExpr, Declaration, Index, Loop, Name, Number, Program, Text,
                                    is_index_type, is_mask_type, parse_program)
from irfuse.frontend.syntax import If as IfStatement

_SYMBOLS = {name: symbol for symbol, name in COMPARISONS.items()}
_MESH = {"gather": "irfuse.gather", "scatter": "irfuse.scatter", "select": "irfuse.where"}
_REDUCTIONS = ("sum", "max", "min")
# The generic ops an infix form stands for, written as NumPy's function of that form (the
# front end reads `np.add(a, b)` as `a + b`, and so resolves it by the operands' shapes).
_INFIX_NUMPY = {"add": "np.add", "sub": "np.subtract", "emul": "np.multiply", "ediv": "np.divide",
                "pow": "np.power", "floordiv": "np.floor_divide", "mod": "np.remainder", "neg": "np.negative",
                "mmul": "np.matmul", "mvmul": "np.matmul", "dot": "np.dot"}


@functools.cache
def _numpy_spellings() -> dict[str, tuple[str, str, int | None]]:
    """generic op -> (NumPy's function written for it, what the front end reads that function
    as, its operands): the front end's own table (`numpy_functions`) turned round, NumPy's
    names before `math`'s, and the infix forms' ops of `_INFIX_NUMPY`."""
    from irfuse.frontend.python import numpy_functions

    found = {spelled: (what, count) for spelled, what, count in numpy_functions().values()}
    table = {what[3:]: (spelled, what, count) for spelled, (what, count) in found.items()
             if what.startswith("op:") and spelled.startswith("np.")}
    table.update({op: (spelled, *found[spelled]) for op, spelled in _INFIX_NUMPY.items()})
    return table


class NoPythonForm(Exception):
    """The KAS program has something its Python rendering does not write (the message says what)."""


def python_source(kas_text: str, name: str = "rendered", inline: bool = False, infix: bool = False) -> str | None:
    """The Python module text of KAS `kas_text` as function `name` (see the module), or None.
    `inline`: an output made by the program's last top-level statement naming it, and read by
    none after, is returned as that statement's expression (`return ops.f(a), r[1]`; an entry
    copied out as the entry), which the front end names by its place (`out<k>`). `infix`: a
    call the front end writes as an infix form for its operands' shapes (`frontend.python.
    infix_op`, `infix_family`: `a + b`, `A @ v`, `-x`, a scalar product either way round:
    `s * A` or `A * s`, in turn; `x += y` where the target is the left operand, in turn;
    a transpose as `A.T`) written so, and every other variable first assigned at the top
    level declared there (`y: irfuse.Scalar = ...`) instead of by a line of its own; and, one
    place in three (`_spelled`), Python's own spellings: a number as a name of the module bound
    to it, an entry counted from the end (`x[-1]`), an entry of an entry copied just before as
    one subscript (`A[i, j]` for `r[j]` after `r = A[i]`), a copy as `+x`, a select as `a if m else b`,
    a loop's trips as `range(2, N + 2)` or `range(0, 2 N, 2)`,
    the generic `abs`, `max`, `min` as Python's functions (`ediv` and `pow` as `/` and `**`
    wherever the front end reads them so), an op's operands by their names, the last first
    (`ops.mmul(B=b, A=a)`), a generic op as NumPy's function of its meaning (`np.sin(x)`,
    `np.add(a, b)` where the front end reads it as this op; a contraction summing every entry
    of one value `np.sum(x)`; every other one of them an array method where its first operand is
    a variable or an entry, `A.trace()`, `v.dot(w)`), a value NumPy makes as NumPy's call
    (`np.eye(3)`, `2.0 * np.identity(3)`, `np.array([a, b])`, `np.stack([u, w])`, `np.square(x)`:
    `_numpy_made`; entries a step apart stacked as NumPy's slice, `A[0:2]`), an entry of a value
    of two axes or more as NumPy's slice of it (`A[1, :]`) and a copy as `A[:]` every other
    time, every seventh statement after a
    loop of no trips holding it
    (`for _ in range(0):`), two lines where the second reads nothing the first
    writes as one tuple assignment (`a, b = x, y`); and always, with `infix`, the logic of masks
    as NumPy's `&`, `|`, `^`, `~`, a condition's `and(lt(a, x), le(x, b))` as Python's chain
    `a < x <= b` (without it `xor` is `m != n`), and a program's last statement, an `if`, with
    a `return` in each side (`_returning_sides`)."""
    program = parse_program(SourceFile("<rendered>", kas_text))
    try:
        return _Renderer(program, inline, infix).module(name)
    except NoPythonForm:
        return None


class _Renderer:
    def __init__(self, program: Program, inline: bool = False, infix: bool = False):
        self.program = program
        self.infix, self.turn = infix, 0
        self.spelled = 0  # (the Python spellings of `_spelled`, taken in turn)
        self.plain = 0  # (the plain statements written: every seventh after a loop of no trips)
        self.constants: dict[str, str] = {}  # number text -> the module's name bound to it
        # r -> (A, i) where the block's last statements copied A[i] into r and wrote neither
        # since: r[j] may be written A[i, j]
        self.entries: dict[str, tuple[str, str]] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.masks = {n.text for d in program.declarations for n in d.names if is_mask_type(d.type_text)}
        for d in program.declarations:
            for n in d.names:
                length = d.lengths.get(n.text)
                self.shapes[n.text] = d.shape if length is None else (length, *d.shape)
        self.returned: dict[int, str] = {}  # output position -> the expression returned there
        self.annotated: set[str] = set()  # variables declared where first assigned (`module`)
        # variables a plain statement of the top level wrote: held from there on, so that a
        # statement after it, in a loop or a branch too, may assign all their entries (`x[:] = ...`)
        self.top_written: set[str] = set()
        if inline:
            self._inline()
        self.types: dict[str, str] = {}
        for d in program.declarations:
            for n in d.names:
                self.types[n.text] = _annotation(d, d.lengths.get(n.text))

    def _inline(self) -> None:
        """Moves into the return each output's making statement where that keeps the program
        (see `python_source`): the statement is the last of the top level to write the output,
        nothing after it reads or writes the output or writes its operands, it is no input and
        is returned once."""
        p = self.program
        names = [o.text for o in p.outputs]
        inputs = {n.text for n in p.inputs}
        moved_reads: set[str] = set()  # (what the return's expressions read: values it needs kept)
        moved: set[str] = set()  # (the outputs whose statements moved: no variable holds them now)
        for k, out in enumerate(names):
            if out in inputs or names.count(out) > 1 or out in moved_reads:
                continue
            for i in range(len(p.statements) - 1, -1, -1):
                s = p.statements[i]
                if out in _touched(s):
                    if isinstance(s, (Loop, IfStatement)) or not isinstance(s.target, Name) or \
                            s.target.text != out or out in _read(s) or any(isinstance(a, Text) for a in s.args):
                        break
                    if s.op.text == COPY and not isinstance(s.args[0], Index):
                        break  # (a copy of a whole value returned is that value under its own name)
                    if _read(s) & set().union(*(_written(t) for t in p.statements[i + 1:])):
                        break  # (an operand written again after: the return would read its last value)
                    if _read(s) & moved:
                        break  # (an operand whose statement moved into the return)
                    self.returned[k] = self.call(s.op.text, s.args)
                    moved_reads |= _read(s)
                    moved.add(out)
                    del p.statements[i]
                    break

    def module(self, name: str) -> str:
        p = self.program
        inputs = [n.text for n in p.inputs]
        lines = ["import numpy as np", "import irfuse", "from irfuse import ops", ""]
        header = len(lines)
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
        self.annotated = self._annotated_where_assigned(inputs)
        body = [f"{v}: {t}" for v, t in self.types.items() if v not in inputs and v not in self.annotated]
        ret = "return " + ", ".join(self.returned.get(k, o.text) for k, o in enumerate(p.outputs))
        last = p.statements[-1] if p.statements else None
        if self.infix and isinstance(last, IfStatement):
            body += self.statements(p.statements[:-1], top=True) + self._returning_sides(last, ret)
        else:
            body += self.statements(p.statements, top=True) + [ret]
        lines[header:header] = [f"{name} = {text}" for text, name in self.constants.items()] + \
            ([""] if self.constants else [])
        return "\n".join(lines + ["    " + line for line in body]) + "\n"

    def _returning_sides(self, s: IfStatement, ret: str) -> list[str]:
        """The program's last statement, an `if`, with the return in each side: `if c: ...;
        return y` then `else: ...; return y`, or the other side's lines after the `if` (an early
        return), in turn; where the program has no derivative line, an output the `if` side's
        last statement makes is returned as that statement's expression there (`return a * b,
        z`: the front end names that place `out<k>`)."""
        then, returned = list(s.then), ret
        outputs = [o.text for o in self.program.outputs]
        tail = then[-1] if then else None
        if not self.program.derivatives and tail is not None and not isinstance(tail, (Loop, IfStatement)) and \
                isinstance(tail.target, Name) and outputs.count(tail.target.text) == 1 and \
                tail.target.text not in {n.text for n in self.program.inputs} and \
                tail.target.text not in _read(tail) and not any(isinstance(a, Text) for a in tail.args) and \
                not (tail.op.text == COPY and not isinstance(tail.args[0], Index)) and not self.returned:
            # (no expression moved into the return already: one might read the output)
            places = list(outputs)
            places[outputs.index(tail.target.text)] = self.call(tail.op.text, tail.args)
            returned, then = "return " + ", ".join(places), then[:-1]
        self.entries.clear()
        out = [f"if {self.condition(s.condition)}:"]
        out += ["    " + line for line in self.statements(then) + [returned]]
        self.entries.clear()
        if len(self.program.statements) % 2:
            return out + ["else:"] + ["    " + line for line in self.statements(s.orelse) + [ret]]
        return out + self.statements(s.orelse) + [ret]

    def _annotated_where_assigned(self, inputs: list[str]) -> set[str]:
        """With `infix`, every other variable whose first use is a plain assignment at the top
        level: declared there (`y: irfuse.Scalar = ...`) instead of by a line of its own."""
        if not self.infix:
            return set()
        seen, chosen = set(inputs), set()
        for s in self.program.statements:
            if not isinstance(s, (Loop, IfStatement)) and isinstance(s.target, Name):
                v = s.target.text
                if v not in seen and v not in _read(s) and len(seen - set(inputs)) % 2 == 0:
                    chosen.add(v)
            seen |= _touched(s)
        return chosen

    def statements(self, statements: list, top: bool = False) -> list[str]:
        out: list[str] = []
        paired = None  # (line, target, value, name written) of the last plain assignment written
        for s in statements:
            if isinstance(s, (Loop, IfStatement)):
                self.entries.clear()  # (their statements, and those after them, start afresh)
                paired = None
            if isinstance(s, Loop):
                bounds = str(s.count)
                if s.index is None and self.infix and self._spelled():  # (the same trips, counted otherwise)
                    bounds = f"2, {s.count + 2}" if s.count % 2 else f"0, {2 * s.count}, 2"
                out.append(f"for {s.index.text if s.index is not None else '_'} in range({bounds}):")
                out += ["    " + line for line in (self.statements(s.body) or ["pass"])]
            elif isinstance(s, IfStatement):
                out.append(f"if {self.condition(s.condition)}:")
                out += ["    " + line for line in (self.statements(s.then) or ["pass"])]
                if s.orelse:
                    out.append("else:")
                    out += ["    " + line for line in self.statements(s.orelse)]
            else:
                target = _operand(s.target)
                zeros = self._shape(s.args[0]) if s.op.text == "zeros" and len(s.args) == 1 else None
                if self.infix and zeros is not None and \
                        not (isinstance(s.args[0], Name) and s.args[0].text in self.masks) and self._spelled():
                    # (a number given to a variable, NumPy's zeros: in every element where it holds one each)
                    value = "0.0" if not zeros else f"np.zeros({zeros[0] if len(zeros) == 1 else zeros})" \
                        if self.spelled % 2 else f"np.zeros_like({self.operand(s.args[0])})"
                else:
                    value = self.call(s.op.text, s.args)
                self.plain += 1
                if self.infix and self.plain % 7 == 0:  # (a loop of no trips before it: Python runs it never)
                    trips = self.plain % 3
                    out += [f"for _ in range({trips}, {trips}):" if trips else "for _ in range(0):",
                            f"    {target} = {value}"]
                    paired = None
                both = re.fullmatch(rf"\({re.escape(target)} (\*\*|//|[-+*/@%]) (.+)\)", value) if self.infix else None
                if top and target in self.annotated:
                    self.annotated.discard(target)  # (its first assignment declares it)
                    out.append(f"{target}: {self.types[target]} = {value}")
                    paired = None
                elif isinstance(s.target, Name) and target in self.top_written and self.shapes.get(target) \
                        and "Nodal" not in self.types.get(target, "") and self._spelled() and self.spelled % 2:
                    out.append(f"{target}[:] = {value}")  # (NumPy's assignment to every entry of a value held)
                    paired = None
                elif both is not None and isinstance(s.target, Name) and self.turn % 3 == 0:
                    out.append(f"{target} {both.group(1)}= {both.group(2)}")  # (`x += y`, in turn)
                    paired = None
                elif paired is not None and paired[3] not in _read(s) and "0.0" not in (value, paired[2]) and \
                        self.infix and self._spelled():
                    # (`a, b = x, y` for two lines where y reads no a: every value computed first)
                    out[paired[0]] = f"{paired[1]}, {target} = {paired[2]}, {value}"
                    paired = None
                else:
                    out.append(f"{target} = {value}")
                    paired = (len(out) - 1, target, value, s.target.text if isinstance(s.target, Name)
                              else s.target.name.text)
                shape = self.shapes.get(target) if isinstance(s.target, Name) else None
                if self.infix and shape and len(shape) >= 2 and "Nodal" not in self.types.get(target, "") and \
                        self._spelled() and self.spelled % 2:  # (an entry of an entry assigned: its own value)
                    out.append(f"{target}[0, 0] = {target}[0, 0]")
                    paired = None
                written = s.target.text if isinstance(s.target, Name) else s.target.name.text
                if top and isinstance(s.target, Name):
                    self.top_written.add(written)
                self.entries = {r: (a, i) for r, (a, i) in self.entries.items() if written not in (r, a)}
                if s.op.text == COPY and isinstance(s.target, Name) and isinstance(s.args[0], Index):
                    self.entries[written] = (s.args[0].name.text, _operand(s.args[0].index))
            if isinstance(s, (Loop, IfStatement)):
                self.entries.clear()
        return out

    def call(self, op: str, args: list) -> str:
        text = [self.operand(a) for a in args]
        if op == COPY and not (self.infix and isinstance(args[0], (Name, Index)) and self._spelled()):
            return text[0]
        if op in _SYMBOLS and len(args) == 2:
            return f"({text[0]} {_SYMBOLS[op]} {text[1]})"
        if op in ("and", "or", "xor") and len(args) == 2:
            chain = self._chain(op, args)
            if chain is not None:
                return chain
            if self.infix:  # (NumPy's logic of boolean arrays)
                from irfuse.frontend.python import MASK_LOGIC

                symbol = next(s for s, name in MASK_LOGIC.values() if name == op)
                return f"({text[0]} {symbol} {text[1]})"
            return f"({text[0]} {'!=' if op == 'xor' else op} {text[1]})"  # (masks differing: `!=`)
        if op == "not" and len(args) == 1:
            return f"(~{text[0]})" if self.infix else f"(not {text[0]})"
        if op == COPY:
            if isinstance(args[0], Name) and self.shapes.get(args[0].text) and self.spelled % 2:
                return f"{text[0]}[:]"  # (NumPy's slice of every entry: a copy)
            return f"+{text[0]}"  # (Python's unary plus: the value itself)
        if self.infix and self._made_in_numpy(op, args) and self._spelled():
            return self._numpy_made(op, args, text)
        if self.infix and self._reduced_in_numpy(op, args) and self._spelled() and self.spelled % 2:
            if op == "trace":  # (NumPy's reductions of a value it makes: np.sum(np.diag(A)), np.max([a, b]))
                return f"np.sum(np.diag({text[0]}))"
            return f"np.{op}(np.array([{', '.join(text)}]))" if self.spelled % 4 == 1 else \
                f"np.array([{', '.join(text)}]).{op}()"
        if self.infix and op in _numpy_spellings() and self._spelled():  # (NumPy's function of its meaning)
            numpy = self._numpy(op, args, text)
            if numpy is not None:
                return numpy
        if self.infix and self._spelled():
            if op == "select" and len(args) == 3:
                return f"({text[1]} if {text[0]} else {text[2]})"
            if (op, len(args)) in (("abs", 1), ("max", 2), ("min", 2)):
                if op != "abs" and self.spelled % 2:  # (of three values, the last again: max(max(a, b), b))
                    return f"{op}({text[0]}, {text[1]}, {text[1]})"
                return f"{op}({', '.join(text)})"  # (Python's own functions, read as the generic ops)
        if self.infix and op == "add" and len(args) == 2 and self._shape(args[1]) == () and self._shape(args[0]) \
                and self._spelled():  # (`v + s` as `s - (-v)`: NumPy's broadcast of a scalar on the left, exactly)
            return f"({text[1]} - (-{text[0]}))"
        if op in _MESH:
            return f"{_MESH[op]}({', '.join(text)})"
        if op in _REDUCTIONS and len(args) == 1:
            return f"irfuse.{op}({text[0]})"
        if self.infix:
            written = self._infix(op, args, text)
            if written is not None:
                return written
            if self._spelled():  # (by the operands' names, the last first: `ops.mmul(B=b, A=a)`)
                from irfuse.frontend.python import operand_names
                from irfuse.library.catalogue import default_library

                names = operand_names(default_library(), op)
                if names is not None and len(names) == len(text) and not any(isinstance(a, Text) for a in args):
                    return f"ops.{op}({', '.join(f'{n}={t}' for n, t in reversed(list(zip(names, text))))})"
        return f"ops.{op}({', '.join(text)})"

    def _reduced_in_numpy(self, op: str, args: list) -> bool:
        """Whether `op(args)` is the trace of a square matrix or the larger or smaller of two
        numbers (not masks), which NumPy reduces from a value it makes."""
        if op == "trace" and len(args) == 1:
            shape = self._shape(args[0])
            return shape is not None and len(shape) == 2 and shape[0] == shape[1]
        return op in ("max", "min") and len(args) == 2 and all(
            self._shape(a) == () and not (isinstance(a, Name) and a.text in self.masks) for a in args)

    @staticmethod
    def _made_in_numpy(op: str, args: list) -> bool:
        """Whether `op(args)` is a value NumPy makes (`_numpy_made`)."""
        square = re.fullmatch(r"smimul(\d)(\d)", op)
        # (s * np.eye(N) is smimulNN(s) for a positive number s only: its zeros are s * 0, NaN for a
        # NaN s and -0.0 for a negative one, where smimulNN writes 0.0; found by the fuzzer, seed 860102)
        positive = bool(args) and isinstance(args[0], Number) and args[0].value > 0
        return (square is not None and square.group(1) == square.group(2) and positive) or \
            (op == "stack" and bool(args)) or \
            (op in ("emul", "smul") and len(args) == 2 and _operand_text(args[0]) is not None
             and _operand_text(args[0]) == _operand_text(args[1]))

    def _numpy_made(self, op: str, args: list, text: list[str]) -> str:
        """A value NumPy makes, as the front end reads it: `smimulNN(1)` as `np.eye(N)` or
        `np.identity(N)` (`smimulNN(s)` of a positive number as `s * np.eye(N)`, the product by
        the uniform identity), `stack(...)` as `np.array([...])` or `np.stack([...])`, in turn;
        `x * x` as `np.square(x)`."""
        if op == "stack":
            run = _slice_of_entries(args)
            if run is not None and self.spelled % 4 == 1:  # (entries a step apart: NumPy's slice, `A[0:2]`)
                return run
            return f"np.{'array' if self.spelled % 2 else 'stack'}([{', '.join(text)}])"
        if op in ("emul", "smul"):
            return f"np.square({text[0]})"
        identity = f"np.{'eye' if self.spelled % 2 else 'identity'}({op[-1]})"
        one = isinstance(args[0], Number) and args[0].value == 1.0
        return identity if one else f"({text[0]} * {identity})"

    def _numpy(self, op: str, args: list, text: list[str]) -> str | None:
        """`op(args)` as NumPy's function the front end reads as this very generic op, or None:
        one of its arity, and for those that are infix forms (`np.add` is `+`), the one the
        operands' shapes resolve to."""
        spelled, symbol, count = _numpy_spellings()[op]
        if op == "contract" and len(args) == 2 and isinstance(args[0], Text):
            letters = re.fullmatch(r"([a-z]+)->", args[0].text)
            if letters and len(set(letters.group(1))) == len(letters.group(1)):
                return self._method("np.sum", args[1:], text[1:]) or f"np.sum({text[1]})"  # (every entry summed)
        if count is not None and count != len(args):
            return None
        if op in _INFIX_NUMPY:
            written = self._infix(op, args, text)
            if written is None or (symbol != "neg" and f" {symbol} " not in written):
                return None  # (another op for these shapes, or the operands swapped)
            if len(text) == 2 and written.startswith(f"({text[1]} * "):
                return None
        return self._method(spelled, args, text) or f"{spelled}({', '.join(text)})"

    def _method(self, spelled: str, args: list, text: list[str]) -> str | None:
        """NumPy's function `spelled` of `args` as the array method of its first operand, every
        other time where it is one (`A.trace()`, `A.dot(v)`, `x.clip(lo, hi)`: the front end's
        `METHODS`) and that operand a variable or an entry; else None."""
        from irfuse.frontend.python import METHODS

        method = spelled[3:] if spelled.startswith("np.") else None
        if method not in METHODS or not isinstance(args[0], (Name, Index)) or self.spelled % 2:
            return None
        return f"{text[0]}.{method}({', '.join(text[1:])})"

    def _chain(self, op: str, args: list) -> str | None:
        """`and(lt(a, b), le(b, c))` (a condition's calls) as Python's chain `a < b <= c`, or
        None."""
        if not (op == "and" and self.infix and all(isinstance(a, CallExpr) and a.op.text in _SYMBOLS
                                                   and len(a.args) == 2 for a in args)):
            return None
        (a, b), (c, d) = args[0].args, args[1].args
        if _operand_text(b) is None or _operand_text(b) != _operand_text(c):
            return None
        return (f"({self.operand(a)} {_SYMBOLS[args[0].op.text]} {self.operand(b)} {_SYMBOLS[args[1].op.text]} "
                f"{self.operand(d)})")

    def _infix(self, op: str, args: list, text: list[str]) -> str | None:
        """`op(args)` as the infix form the front end reads as this very op, or None."""
        from irfuse.frontend.python import infix_family, infix_op

        shapes = [self._shape(a) for a in args]
        if any(s is None for s in shapes) or len(args) not in (1, 2):
            return None
        if len(args) == 1:
            if infix_op("-", shapes[0], None) == (op, False) or infix_family("-", shapes[0], None) == (op, False):
                return f"(-{text[0]})"
            if len(shapes[0]) == 2 and (op == "transpose" or re.fullmatch(r"mtrans\d+", op)):
                return f"{text[0]}.T"  # (the front end's generic transpose: the suffixed one's values)
            return None
        for symbol in ("+", "-", "*", "/", "@", "**", "//", "%"):
            for found in (infix_op(symbol, shapes[0], shapes[1]), infix_family(symbol, shapes[0], shapes[1])):
                if found == (op, False):
                    self.turn += 1
                    swapped = infix_op(symbol, shapes[1], shapes[0])
                    if symbol == "*" and self.turn % 2 and swapped == (op, True):  # (`s * A`: the operands swapped)
                        return f"({text[1]} * {text[0]})"
                    if symbol == "**" and text[0].startswith("-"):
                        return f"(({text[0]}) ** {text[1]})"  # (`-2 ** x` is -(2 ** x) to Python)
                    return f"({text[0]} {symbol} {text[1]})"
        return None

    def _shape(self, a) -> tuple[int, ...] | None:
        if isinstance(a, Number):
            return ()
        if isinstance(a, Index):
            shape = self.shapes.get(a.name.text)
            return None if shape is None else shape[1:]
        if isinstance(a, Name):
            return self.shapes.get(a.text)
        return None

    def operand(self, a) -> str:
        if isinstance(a, CallExpr):
            return self.call(a.op.text, a.args)
        if self.infix and isinstance(a, Number) and self._spelled():
            return self._constant(a.text)
        if self.infix and isinstance(a, Index) and a.name.text in self.entries and self._spelled():
            array, first = self.entries[a.name.text]  # (`r = A[i]` before: r[j] is A[i, j])
            return f"{array}[{first}, {_operand(a.index)}]"
        if self.infix and isinstance(a, Index) and isinstance(a.index, Number) and self._spelled():
            shape = self.shapes.get(a.name.text) or (None,)
            if len(shape) >= 2:  # (the entry as NumPy's slice of it: `A[1, :]`)
                return f"{a.name.text}[{int(a.index.value)}, :]"
            if shape[0] is not None:  # (counted from the end, as Python may)
                return f"{a.name.text}[{int(a.index.value) - shape[0]}]"
        return _operand(a)

    def _spelled(self) -> bool:
        """Whether this place takes a Python spelling of its own, in turn (one of three): a
        number as a name of the module bound to it, an entry counted from the end, `+x` for a
        copy, `a if m else b` for a select, `abs`, `max` and `min` for those generic ops."""
        self.spelled += 1
        return self.spelled % 3 == 0

    def _constant(self, text: str) -> str:
        """The name of the module's constant bound to number `text` (`K_1 = 0.5`)."""
        if text not in self.constants:
            k = len(self.constants) + 1
            while f"K_{k}" in self.shapes:
                k += 1
            self.constants[text] = f"K_{k}"
        return self.constants[text]

    def condition(self, c) -> str:
        if c.op is None:
            return self.operand(c.lhs)
        return f"{self.operand(c.lhs)} {c.op} {self.operand(c.rhs)}"


def _touched(s) -> set[str]:
    """The names a statement reads or writes (its nested statements' included)."""
    if isinstance(s, Loop):
        return set().union(*(_touched(t) for t in s.body)) if s.body else set()
    if isinstance(s, IfStatement):
        names = _read_condition(s.condition)
        for t in (*s.then, *s.orelse):
            names |= _touched(t)
        return names
    return {s.target.text} | _read(s)


def _written(s) -> set[str]:
    """The names a statement writes (its nested statements' included)."""
    if isinstance(s, Loop):
        return set().union(*(_written(t) for t in s.body)) if s.body else set()
    if isinstance(s, IfStatement):
        return set().union(*(_written(t) for t in (*s.then, *s.orelse))) if s.then or s.orelse else set()
    return {s.target.text}


def _read(s) -> set[str]:
    names = set()
    for a in s.args:
        if isinstance(a, Index):
            names |= {a.name.text} | ({a.index.text} if isinstance(a.index, Name) else set())
        elif isinstance(a, Name):
            names.add(a.text)
    if isinstance(s.target, Index) and isinstance(s.target.index, Name):
        names.add(s.target.index.text)
    return names


def _read_condition(c) -> set[str]:
    names = set()
    for side in (c.lhs, c.rhs):
        stack = [side]
        while stack:
            x = stack.pop()
            if isinstance(x, CallExpr):
                stack += x.args
            elif isinstance(x, Index):
                names.add(x.name.text)
            elif isinstance(x, Name):
                names.add(x.text)
    return names


def _slice_of_entries(args: list) -> str | None:
    """`stack(A[0], A[1], A[2])` (entries of one value at whole numbers a step apart) as the
    slice `A[0:3]` (`A[2::-1]` backwards), or None."""
    if not args or not all(isinstance(a, Index) and isinstance(a.index, Number) and a.name.text == args[0].name.text
                           for a in args):
        return None
    ks = [int(a.index.value) for a in args]
    step = ks[1] - ks[0] if len(ks) > 1 else 1
    if step == 0 or any(b - a != step for a, b in zip(ks, ks[1:])):
        return None
    stop = ks[-1] + step
    bounds = f"{ks[0]}:{'' if stop < 0 else stop}" + ("" if step == 1 else f":{step}")
    return f"{args[0].name.text}[{bounds}]"


def _operand_text(a) -> str | None:
    """A plain operand's text (a name, number or entry), None for a call."""
    return None if isinstance(a, CallExpr) else _operand(a)


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


def compare_rendering(kas_text: str, seed: int, directory: str, inline: bool = False,
                      infix: bool = False) -> tuple[str, str]:
    """The KAS program and its Python rendering (`python_source`, written under `directory` and
    imported), each traced with its derivative lines applied: ("alike", "") where their IR is
    the same up to the values' and outputs' names, ("same bits", "") where it is not but the
    float64 reference results are, output by output (an op placed apart), ("same to rounding",
    "") where they agree to 1e-11 of the largest (a reverse derivative adds an input's terms in
    its program's order, which a returned expression moves), else ("differ", what) (also where
    the rendering is not traced: a front end's refusal of a program the other takes)."""
    import importlib.util
    import os

    import numpy as np

    from irfuse.dialects.context import module_text
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import with_derivatives
    from irfuse.frontend.irgen import compile_source
    from irfuse.frontend.python import compile_function
    from irfuse.testing.derivatives import float64_inputs
    from irfuse.testing.differential import same_bits
    from irfuse.verification.reference import run_reference

    name = f"rendered_{seed}"
    written = program_of(with_derivatives(compile_source(kas_text, f"{name}.kas")).module)
    text = python_source(kas_text, name, inline=inline, infix=infix)
    if text is None:
        return "differ", "no Python form"
    path = os.path.join(directory, f"{name}_{int(inline)}{int(infix)}_{len(os.listdir(directory))}.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        python = program_of(with_derivatives(compile_function(getattr(module, name).fn)).module)
    except Exception as e:  # noqa: BLE001 -- what the front end said, for the report
        return "differ", f"the rendering is not traced: {type(e).__name__}: {e}\n{text}"
    if canonical_ir(module_text(python), python.outputs) == canonical_ir(module_text(written), written.outputs):
        return "alike", ""
    inputs, nodes = float64_inputs(written, 16, seed)
    if len(python.inputs) != len(written.inputs):
        return "differ", f"the rendering takes inputs {list(python.inputs)}, the program {list(written.inputs)}\n{text}"
    # (inputs by place: a derivative's cotangents are named after outputs, which a returned
    # expression names by its place)
    given = {p: inputs[w] for p, w in zip(python.inputs, written.inputs)}
    with np.errstate(all="ignore"):
        got = run_reference(python, given, n=16, nodes=nodes)
        want = run_reference(written, inputs, n=16, nodes=nodes)
    pairs = list(zip(got.values(), want.values()))
    if len(got) == len(want) and all(same_bits(a, b) for a, b in pairs):
        return "same bits", ""
    if len(got) == len(want) and all(_to_rounding(a, b) for a, b in pairs):
        return "same to rounding", ""  # (a derivative adds its terms in its program's order)
    return "differ", f"the reference results differ\n{text}"


def _to_rounding(a, b) -> bool:
    """Whether float64 results agree to what summing the same terms in another order rounds."""
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    finite = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return False
    scale = np.abs(a[finite]).max(initial=0.0)
    return bool(np.all(np.abs(a[finite] - b[finite]) <= 1e-11 * max(scale, 1.0)))


def canonical_ir(text: str, outputs) -> str:
    """IR text with its values numbered by first appearance and its outputs by place (the
    front ends name some apart)."""
    lines = text.split("\n")
    for k, name in enumerate(outputs):
        lines[1] = re.sub(rf"\b{re.escape(name)}\b", f"output{k}", lines[1])
    names: dict[str, int] = {}
    return re.sub(r"%[A-Za-z_0-9]+", lambda m: f"%{names.setdefault(m.group(0), len(names))}", "\n".join(lines))


def derivative_lines(kas_text: str, seed: int) -> str:
    """`derivative` lines for a random program: forward or reverse mode along its first input of
    values, by the seed, and in one seed of three a forward derivative of that along the
    second."""
    program = parse_program(SourceFile("<derivatives>", kas_text))
    kinds = {n.text: d.type_text for d in program.declarations for n in d.names}
    values = [n.text for n in program.inputs if not (is_index_type(kinds[n.text]) or is_mask_type(kinds[n.text]))]
    lines = f"derivative {('jvp', 'vjp')[seed % 2]} wrt {values[0]};\n"
    if seed % 3 == 0 and len(values) > 1:
        lines += f"derivative jvp wrt {values[1]} prefix e;\n"
    return lines
