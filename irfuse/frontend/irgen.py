"""Semantic checks of a parsed KAS program and its translation to the `kas` dialect.

Each assignment makes a new SSA value (named after its variable).  A loop
carries, as iter_args, the variables it assigns that its body reads before
assigning them; every variable a loop assigns is also a loop result, so it
can be read after the loop.

Uniform values (one for the whole batch) and per-element values are told apart
statically: a variable declared `uniform` holds a uniform value, any other a per-element
one. A literal is a uniform scalar (`kas.constant`), a call of uniform operands only is
uniform and one with a per-element operand per-element; `sum`, `max` and `min` reduce a
per-element value to a uniform one (`kas.reduce`). An assignment whose value is not what
its variable is declared to hold is an error at its line. Loops carry per-element values
only: no reduction and no uniform assignment inside a loop (each would need the whole
batch at every iteration).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

from irfuse.analysis.liveness import live_values
from irfuse.diagnostics import CompileError, Diagnostic, SourceFile
from irfuse.dialects.kas import (
    CallOp,
    MAX_TOTAL_ITERATIONS,
    ConstantOp,
    KasType,
    LoopOp,
    ProgramOp,
    ReduceKind,
    ReduceOp,
    ReturnOp,
    ScalarType,
    YieldOp,
    is_uniform,
    kas_type_of_shape,
    ssa_hint,
)
from irfuse.frontend.source_files import read_source  # noqa: F401 (callers import it from here)
from irfuse.frontend.syntax import Call, Loop, Name, Number, Program, Statement, parse_program
from irfuse.library.catalogue import Library, default_library

MAX_ERRORS = 20
REDUCTIONS = {k.value for k in ReduceKind}  # the calls that reduce over the batch


@dataclass
class FrontendResult:
    module: ModuleOp
    warnings: list[Diagnostic] = field(default_factory=list)


def _assigned(stmts: list[Statement]) -> list[str]:
    """Variables assigned in a statement list (nested loops included), first-assignment order."""
    out: list[str] = []
    for s in stmts:
        names = [s.target.text] if isinstance(s, Call) else _assigned(s.body)
        out.extend(n for n in names if n not in out)
    return out


def _read_before_write(stmts: list[Statement]) -> dict[str, Name]:
    """Variables read in the list before the list assigns them, with the first such read."""
    written: set[str] = set()
    out: dict[str, Name] = {}
    for s in stmts:
        if isinstance(s, Call):
            for a in s.args:
                if isinstance(a, Name) and a.text not in written:
                    out.setdefault(a.text, a)
            written.add(s.target.text)
        else:
            for n, where in _read_before_write(s.body).items():
                if n not in written:
                    out.setdefault(n, where)
            written.update(_assigned(s.body))
    return out


class IRGen:
    def __init__(self, src: SourceFile, prog: Program, library: Library, name: str):
        self.src = src
        self.prog = prog
        self.lib = library
        self.name = name
        self.errors: list[Diagnostic] = []
        self.types: dict[str, KasType] = {}
        self.decl_pos: dict[str, Name] = {}
        self.uniform: set[str] = set()  # variables declared `uniform`
        self.uniform_args: set[SSAValue] = set()  # the uniform inputs' block arguments
        self.call_targets: dict[CallOp | ReduceOp, Name] = {}
        self.enclosing_trips: list[int] = []  # trip counts of the loops around the current statement
        self.constants: dict[float, SSAValue] = {}  # literals, one op per value
        self.top_block = Block()  # the program's block, made in `build`
        self.total_iterations = 0

    def err(self, at: Name | object, message: str, notes: list[str] | None = None) -> None:
        pos = at.pos  # type: ignore[attr-defined]
        self.errors.append(self.src.diag(pos.line, pos.col, message, notes=notes))
        if len(self.errors) >= MAX_ERRORS:
            raise CompileError(self.errors)

    def loc(self, name: Name) -> FileLineColLoc:
        return FileLineColLoc(StringAttr(self.src.name), IntAttr(name.pos.line), IntAttr(name.pos.col))

    def declare(self) -> None:
        for d in self.prog.declarations:
            t = kas_type_of_shape(d.shape)
            for n in d.names:
                if n.text in self.types:
                    first = self.decl_pos[n.text]
                    self.err(n, f"'{n.text}' is already declared",
                             [f"first declared at {self.src.name}:{first.pos.line}:{first.pos.col}"])
                    continue
                self.types[n.text] = t
                self.decl_pos[n.text] = n
                if d.uniform:
                    self.uniform.add(n.text)

    def lookup(self, env: dict[str, SSAValue], n: Name) -> SSAValue | None:
        if n.text not in self.types:
            self.err(n, f"use of undeclared variable '{n.text}'",
                     [f"declare it first, e.g. '{_suggest_type(self.types)} {n.text};'"])
            return None
        if n.text not in env:
            self.err(n, f"variable '{n.text}' is used before it is assigned",
                     ["list it after 'input' or assign it with a statement before this use"])
            return None
        return env[n.text]  # None after an earlier error on its assignment: already reported

    def build(self) -> FrontendResult:
        self.declare()
        seen: dict[str, Name] = {}
        env: dict[str, SSAValue] = {}
        in_types = []
        for n in self.prog.inputs:
            if n.text not in self.types:
                self.err(n, f"input '{n.text}' is not declared",
                         [f"declare it first, e.g. '{_suggest_type(self.types)} {n.text};'"])
            elif n.text in seen:
                self.err(n, f"input '{n.text}' is listed twice")
            else:
                seen[n.text] = n
                in_types.append(self.types[n.text])
        inputs = list(seen)
        block = self.top_block = Block(arg_types=in_types)
        for name, arg in zip(inputs, block.args):
            arg.name_hint = ssa_hint(name)
            arg.location = self.loc(seen[name])  # where the `input` statement names it
            env[name] = arg
            if name in self.uniform:
                self.uniform_args.add(arg)
        self.statements(self.prog.statements, env, block)
        outs: list[SSAValue] = []
        out_names: list[str] = []
        for n in self.prog.outputs:
            if n.text not in self.types:
                self.err(n, f"return value '{n.text}' is not declared")
                continue
            if n.text in out_names:
                self.err(n, f"'{n.text}' is returned twice")
                continue
            v = self.lookup(env, n)
            if v is not None:
                outs.append(v)
            out_names.append(n.text)
        if self.errors:
            raise CompileError(self.errors)
        ret = ReturnOp(outs)
        if self.prog.outputs:
            ret.location = self.loc(self.prog.outputs[0])
        block.add_op(ret)
        program = ProgramOp(self.name, inputs, in_types, out_names, Region(block),
                            [n for n in inputs if n in self.uniform])
        if self.prog.inputs:
            program.location = self.loc(self.prog.inputs[0])
        module = ModuleOp([program])
        return FrontendResult(module, self.warnings(program, inputs))

    def statements(self, stmts: list[Statement], env: dict[str, SSAValue], block: Block) -> None:
        for s in stmts:
            if isinstance(s, Call):
                self.call(s, env, block)
            else:
                self.loop(s, env, block)

    def is_uniform(self, v: SSAValue) -> bool:
        return is_uniform(v, self.uniform_args)

    def call(self, s: Call, env: dict[str, SSAValue | None], block: Block) -> None:
        before, old = len(self.errors), env.get(s.target.text)
        self._call(s, env, block)
        if len(self.errors) > before or s.target.text not in env or env[s.target.text] is old:
            # Reported here, or (an operand's error) before: later uses of the target stay quiet.
            env[s.target.text] = None

    def operand(self, a: Name | Number, env: dict[str, SSAValue | None], block: Block) -> SSAValue | None:
        """A name's value, or a literal's `kas.constant`: one per number, in the program's own
        block (before the loop a literal is written in, which is added once its body is done),
        so that a loop's body holds calls only and may run inside a kernel."""
        if isinstance(a, Name):
            return self.lookup(env, a)
        if a.value not in self.constants:
            const = ConstantOp(a.value)
            const.location = self.loc(a)  # type: ignore[arg-type]
            self.top_block.add_op(const)
            self.constants[a.value] = const.res
        return self.constants[a.value]

    def _call(self, s: Call, env: dict[str, SSAValue | None], block: Block) -> None:
        if s.op.text in REDUCTIONS:
            self.reduction(s, env, block)
            return
        op = self.lib.get(s.op.text)
        target_type = self.types.get(s.target.text)
        if target_type is None:
            self.err(s.target, f"assignment to undeclared variable '{s.target.text}'",
                     [f"declare it first, e.g. '{_suggest_type(self.types)} {s.target.text};'"])
        if op is None or len(s.args) != len(op.operand_types):
            for a in s.args:
                if isinstance(a, Name):
                    self.lookup(env, a)
        if op is None:
            close = self.lib.closest(s.op.text)
            self.err(s.op, f"unknown op '{s.op.text}'",
                     [f"did you mean {', '.join(repr(c) for c in close)}?"] if close else
                     ["'irfuse ops' lists the library; 'sum', 'max' and 'min' reduce over the batch"])
            return
        if len(s.args) != len(op.operand_types):
            self.err(s.op, f"'{op.name}' takes {len(op.operand_types)} operand(s), got {len(s.args)}",
                     [f"signature: {op.signature()}"])
            return
        ok = True
        args: list[SSAValue | None] = []
        for k, (a, want) in enumerate(zip(s.args, op.operand_types)):
            if isinstance(a, Number) and want != ScalarType():
                self.err(a, f"operand {k + 1} of '{op.name}' must be {want.spelling()}, but the number "
                         f"{a.text} is a scalar", [f"signature: {op.signature()}"])
                ok = False
                args.append(None)
                continue
            v = self.operand(a, env, block)
            args.append(v)
            if v is not None and v.type != want:
                self.err(a, f"operand {k + 1} of '{op.name}' must be {want.spelling()}, "
                         f"but '{a.text}' is {v.type.spelling()}",  # type: ignore[attr-defined]
                         [f"signature: {op.signature()}"])
                ok = False
        if target_type is not None and target_type != op.result_type:
            self.err(s.target, f"'{op.name}' returns {op.result_type.spelling()}, but '{s.target.text}' "
                     f"is declared {target_type.spelling()}", [f"signature: {op.signature()}"])
            ok = False
        if not ok or target_type is None or any(v is None for v in args):
            return
        per_element = next((a for a, v in zip(s.args, args) if not self.is_uniform(v)), None)  # type: ignore[arg-type]
        if not self.check_target(s, per_element is None, per_element):
            return
        call = CallOp(op.name, args, op.result_type)  # type: ignore[arg-type]
        call.location = self.loc(s.target)
        call.res.name_hint = ssa_hint(s.target.text)
        self.call_targets[call] = s.target
        block.add_op(call)
        env[s.target.text] = call.res

    def check_target(self, s: Call, uniform: bool, per_element: Name | Number | None = None) -> bool:
        """Whether the statement's value (uniform or not) is what its variable holds; an error
        at the statement when not."""
        t = s.target.text
        if uniform and t not in self.uniform:
            what = (f"'{s.op.text}' reduces over the batch" if s.op.text in REDUCTIONS
                    else f"'{s.op.text}' of uniform operands only")
            self.err(s.target, f"{what}: its value is one for the whole batch, but '{t}' is per-element",
                     [f"declare it 'uniform {self.types[t].spelling()} {t};'"])
            return False
        if t in self.uniform and self.enclosing_trips:  # (said first: inside a loop it would read per element)
            self.err(s.target, f"'{t}' is uniform and cannot be assigned inside a loop",
                     ["loops carry per-element values; compute the uniform value before the loop"])
            return False
        if not uniform and t in self.uniform:
            self.err(s.target, f"'{t}' is uniform, but '{s.op.text}' of the per-element "
                     f"'{per_element.text}' gives one value per element",  # type: ignore[union-attr]
                     ["a uniform variable holds one value for the whole batch: reduce a per-element value "
                      "with sum, max or min, or declare the variable without 'uniform'"])
            return False
        return True

    def reduction(self, s: Call, env: dict[str, SSAValue | None], block: Block) -> None:
        kind = s.op.text
        if self.enclosing_trips:
            self.err(s.op, f"'{kind}' cannot be inside a loop",
                     ["a reduction needs the whole batch, so every iteration would need its own pass "
                      "over it: reduce after the loop"])
            return
        if len(s.args) != 1:
            self.err(s.op, f"'{kind}' takes 1 operand (the per-element value to reduce over the batch), "
                     f"got {len(s.args)}")
            return
        a = s.args[0]
        if isinstance(a, Number):
            self.err(a, f"'{kind}' reduces a per-element value over the batch, not the number {a.text}")
            return
        v = self.lookup(env, a)
        target_type = self.types.get(s.target.text)
        if target_type is None:
            spelling = v.type.spelling() if v is not None else "scalar"  # type: ignore[attr-defined]
            self.err(s.target, f"assignment to undeclared variable '{s.target.text}'",
                     [f"declare it first, e.g. 'uniform {spelling} {s.target.text};'"])
            return
        if v is None:
            return
        if self.is_uniform(v):
            self.err(a, f"'{kind}' reduces a per-element value over the batch, but '{a.text}' is uniform")
            return
        if v.type != target_type:
            self.err(s.target, f"'{kind}' of '{a.text}' is {v.type.spelling()}, but '{s.target.text}' is "  # type: ignore[attr-defined]
                     f"declared {target_type.spelling()}",
                     ["a reduction combines the batch's values word by word: it has its operand's type"])
            return
        if not self.check_target(s, True):
            return
        op = ReduceOp(kind, v)
        op.location = self.loc(s.target)
        op.res.name_hint = ssa_hint(s.target.text)
        self.call_targets[op] = s.target
        block.add_op(op)
        env[s.target.text] = op.res

    def loop(self, s: Loop, env: dict[str, SSAValue], block: Block) -> None:
        runs = s.count
        for t in self.enclosing_trips:
            runs *= t
        self.total_iterations += runs
        if self.total_iterations > MAX_TOTAL_ITERATIONS:
            trips = " x ".join(str(t) for t in [*self.enclosing_trips, s.count])
            self.err(s, f"the program's loops would run {self.total_iterations:,} iterations in all (this one "
                     f"{runs:,}: {trips}); at most {MAX_TOTAL_ITERATIONS:,} are allowed",
                     ["each iteration launches the loop body's kernels from the host"])
            raise CompileError(self.errors)
        self.enclosing_trips.append(s.count)
        try:
            self._loop(s, env, block)
        finally:
            self.enclosing_trips.pop()

    def _loop(self, s: Loop, env: dict[str, SSAValue], block: Block) -> None:
        assigned = _assigned(s.body)
        rbw = _read_before_write(s.body)
        carried = [n for n in assigned if n in rbw]
        results = carried + [n for n in assigned if n not in rbw]
        ok = True
        for n in carried:
            if n in env and env[n] is None:
                ok = False
            elif n not in env and n in self.types:
                self.err(rbw[n], f"'{n}' is read in the loop before the loop assigns it, "
                         "and it has no value before the loop",
                         ["assign it before the loop so the first iteration has a value"])
                ok = False
        for n in results:
            if n not in self.types:
                ok = False  # reported when the body is checked
        body = Block(arg_types=[self.types[n] for n in carried] if ok else [])
        inner = dict(env)
        if ok:
            for n, arg in zip(carried, body.args):
                arg.name_hint = ssa_hint(n)
                inner[n] = arg
        else:
            for n in carried:
                inner[n] = None  # already reported
        before = len(self.errors)
        self.statements(s.body, inner, body)
        if not ok or len(self.errors) > before or any(inner.get(n) is None for n in results):
            for n in results:
                env[n] = None  # reported (here or where a value it reads failed); later uses stay quiet
            return
        body.add_op(YieldOp([inner[n] for n in results]))
        loop = LoopOp(s.count, [env[n] for n in carried], [self.types[n] for n in results],
                      Region(body))
        loop.location = FileLineColLoc(StringAttr(self.src.name), IntAttr(s.pos.line), IntAttr(s.pos.col))
        block.add_op(loop)
        for n, r in zip(results, loop.res):
            r.name_hint = ssa_hint(n)
            env[n] = r

    def warnings(self, program: ProgramOp, inputs: list[str]) -> list[Diagnostic]:
        live = live_values(program)
        out = []
        for name, arg in zip(inputs, program.body.block.args):
            if arg not in live:
                pos = next(n for n in self.prog.inputs if n.text == name).pos
                out.append(self.src.diag(pos.line, pos.col, f"input '{name}' is never used", "warning"))
        for call, target in self.call_targets.items():
            if call.res not in live:
                out.append(self.src.diag(
                    target.pos.line, target.pos.col,
                    f"the value assigned to '{target.text}' by '{_statement_name(call)}' is never used",
                    "warning", ["the kas-dce pass removes this statement"]))
        out.sort(key=lambda d: (d.line, d.col))
        return out


def _statement_name(op: CallOp | ReduceOp) -> str:
    return op.op_name if isinstance(op, CallOp) else op.reduce_kind.value


def _suggest_type(types: dict[str, KasType]) -> str:
    """The most common declared type, as a plausible spelling for a missing declaration."""
    from collections import Counter

    counts = Counter(t.spelling() for t in types.values())
    return counts.most_common(1)[0][0] if counts else "matrix3x3"


def program_name(path: str) -> str:
    """The program's symbol: the file's stem as an identifier (`<stdin>` gives `stdin`)."""
    stem = os.path.splitext(os.path.basename(path))[0].strip("<>")
    stem = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return stem if stem and not stem[0].isdigit() else f"p_{stem}"


def compile_source(text: str, filename: str = "<input>", library: Library | None = None) -> FrontendResult:
    """KAS source text to a module holding one `kas.program`; raises `CompileError`."""
    src = SourceFile(filename, text)
    return build_module(src, parse_program(src), library or default_library(), program_name(filename))


def build_module(src: SourceFile, prog: Program, library: Library, name: str) -> FrontendResult:
    """The `kas` IR of a syntax tree (from KAS text or a Python function) whose positions are
    in `src`; raises `CompileError` there."""
    return IRGen(src, prog, library, name).build()


def compile_file(path: str, library: Library | None = None) -> FrontendResult:
    return compile_source(read_source(path), path, library)
