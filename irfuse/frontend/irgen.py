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

Meshes: a variable declared `nodal` holds one value per node. Per-element code reads a nodal
value through `gather(X, conn)` (through an `indexK` input, into a per-element variable of K
rows); `scatter(fe, conn)` makes one (the sum of each element's K rows at its nodes); a
nodal statement (a call whose operands are nodal or uniform, into a nodal variable) runs once
per node, at the program's top level. A scatter is a statement of the top level, a gather may
stand anywhere (it reads what no loop changes: it runs once, before the loops and branches
around it; a gather of a value made from a scatter's sums runs in a second pass over the
elements), and a connectivity is read by them alone. Kernels run gathers as their loads:
a gathered value that a scatter reads or the program returns as it is gets a kernel of its
own through an exact copy, `scale` by 1 (`materialized`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import field

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

from irfuse.analysis.liveness import live_values
from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, Diagnostic, SourceFile
from irfuse.dialects.kas import (
    CallOp,
    MAX_AXES,
    MAX_TOTAL_ITERATIONS,
    ConstantOp,
    GatherOp,
    IndexType,
    KasType,
    LoopOp,
    ProgramOp,
    ReduceKind,
    ReduceOp,
    MaskType,
    ReturnOp,
    ScalarType,
    ScatterOp,
    YieldOp,
    uniform_leaf,
    uniform_through_calls,
    kas_type_of_shape,
    ssa_hint,
)
from irfuse.frontend.source_files import read_source  # noqa: F401 (callers import it from here)
from irfuse.frontend.syntax import (COMPARISONS, COPY, Call, CallExpr, Condition, Derivative, If, Index,
                                    Loop, Name, Number, Program, Statement, Text, is_index_type, is_mask_type,
                                    parse_program)
from irfuse.library.families import STRING_ELSEWHERE, STRING_FIRST, string_params
from irfuse.library.indexexpr import DefinitionError
from irfuse.library.catalogue import Library, default_library

MAX_ERRORS = 20
# Statements a program's unrolled loops (`loop q N`) may make in all: each iteration is a
# copy of the body, and a program of this many calls is already slow to plan.
MAX_UNROLLED_STATEMENTS = 20_000
REDUCTIONS = {k.value for k in ReduceKind}  # the calls that reduce over the batch
CONNECTIVITY_CALLS = ("gather", "scatter")  # statements that read a connectivity


def is_reduction(op: str, operands: int) -> bool:
    """Whether a call reduces over the batch: `sum`, `max` and `min` of one operand (`max(a, b)`
    and `min(a, b)` are the generic ops, entry by entry)."""
    return op in REDUCTIONS and not (op in ("min", "max") and operands == 2)


@record
class FrontendResult:
    """A program's module as its source wrote it, the warnings about it, and its `derivative`
    lines (with the source their positions are in): the driver applies them, in order
    (`irfuse.driver.front`), where the module stands for the program it was compiled from."""

    module: ModuleOp
    warnings: list[Diagnostic] = field(default_factory=list)
    derivatives: list[Derivative] = field(default_factory=list)
    source: SourceFile | None = None


@record
class _Entries:
    """An array being assigned entry by entry in straight-line code (an unrolled loop): its
    entries' values so far, and the array value the others come from (None: they have none
    yet). Made one value (`IRGen.materialize`) where the array is read whole."""

    type: KasType
    base: SSAValue | None
    values: dict[int, SSAValue]
    at: object  # the first entry's assignment, where an error about the whole is reported


def _assigned(stmts: list[Statement]) -> list[str]:
    """Variables assigned in a statement list (nested loops and branches included; an array
    whose entry is assigned), first-assignment order."""
    out: list[str] = []
    for s in stmts:
        if isinstance(s, Call):
            names = [s.target.text]
        elif isinstance(s, If):
            names = _assigned(s.then) + _assigned(s.orelse)
        else:
            names = _assigned(s.body)
        out.extend(n for n in names if n not in out)
    return out


def _read_names(operands) -> list[Name]:
    """The variables operands read (an array's entry reads the array)."""
    return [a.name if isinstance(a, Index) else a for a in operands if isinstance(a, (Name, Index))]


def _read_before_write(stmts: list[Statement]) -> dict[str, Name]:
    """Variables read in the list before the list assigns them, with the first such read. An
    assignment of an array's entry reads the array (its other entries stay), and a variable
    one branch of an `if` assigns is read by the selection that keeps its old value."""
    written: set[str] = set()
    out: dict[str, Name] = {}
    for s in stmts:
        if isinstance(s, Call):
            reads = _read_names(s.args) + ([s.target.name] if isinstance(s.target, Index) else [])
            for a in reads:
                if a.text not in written:
                    out.setdefault(a.text, a)
            written.add(s.target.text)
        elif isinstance(s, If):
            c = s.condition
            for a in _read_names([c.lhs, c.rhs]):
                if a.text not in written:
                    out.setdefault(a.text, a)
            then, orelse = _assigned(s.then), _assigned(s.orelse)
            for branch in (s.then, s.orelse):
                for n, where in _read_before_write(branch).items():
                    if n not in written:
                        out.setdefault(n, where)
            for n in set(then) ^ set(orelse):
                if n not in written:
                    out.setdefault(n, Name(n, s.pos))
            written.update(then + orelse)
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
        self.nodal: set[str] = set()  # variables declared `nodal`
        self.mesh_operands = False  # translating a gather's or scatter's operands
        self.nodal_values: set[SSAValue] = set()  # nodal inputs, scatters' sums, nodal statements' values
        self.branches = 0  # the 'if's around the current statement
        self.uniform_args: set[SSAValue] = set()  # the uniform inputs' block arguments
        self.uniform_memo: dict[SSAValue, bool] = {}  # (`is_uniform`'s answers)
        self._uniform_leaf = lambda w: uniform_leaf(w, self.uniform_args)
        self.call_targets: dict[CallOp | ReduceOp, Name] = {}
        self.enclosing_trips: list[int] = []  # trip counts of the loops around the current statement
        self.constants: dict[tuple[float, float], SSAValue] = {}  # literals, one op per value and sign
        self.top_block = Block()  # the program's block, made in `build`
        self.total_iterations = 0
        self.index_values: dict[str, int] = {}  # the indices of the unrolled loops around, and their values now
        self.current_block = Block()  # where the statement being translated goes (whole reads add ops there)
        self.unrolled = 0  # statements the unrolled loops have made

    def err(self, at: Name | object, message: str, notes: list[str] | None = None) -> None:
        pos = at.pos  # type: ignore[attr-defined]
        self.errors.append(self.src.diag(pos.line, pos.col, message, notes=notes))
        if len(self.errors) >= MAX_ERRORS:
            raise CompileError(self.errors)

    def loc(self, name: Name) -> FileLineColLoc:
        return FileLineColLoc(StringAttr(self.src.name), IntAttr(name.pos.line), IntAttr(name.pos.col))

    def declare(self) -> None:
        for d in self.prog.declarations:
            for n in d.names:
                length = d.lengths.get(n.text)
                if is_mask_type(d.type_text):
                    if length is not None:
                        self.err(n, f"'{n.text}': an array of masks is not a type",
                                 ["masks are one truth value per element; keep several in scalars (0 or 1)"])
                        continue
                    t: KasType = MaskType()
                elif is_index_type(d.type_text):
                    if length is not None or d.uniform or d.nodal:
                        self.err(n, f"'{n.text}': a connectivity is an input of {d.shape[0]} node numbers per "
                                 "element; it is not " + ("an array" if length is not None else
                                                          "uniform" if d.uniform else "nodal"))
                        continue
                    t = IndexType(d.shape[0])
                else:
                    shape = d.shape if length is None else (length, *d.shape)
                    if len(shape) > 4:
                        self.err(n, f"'{n.text}': an array of {d.type_text} has {len(shape)} axes; values have at "
                                 "most 4")
                        continue
                    t = kas_type_of_shape(shape)
                if n.text in self.types:
                    first = self.decl_pos[n.text]
                    self.err(n, f"'{n.text}' is already declared",
                             [f"first declared at {self.src.name}:{first.pos.line}:{first.pos.col}"])
                    continue
                self.types[n.text] = t
                self.decl_pos[n.text] = n
                if d.uniform:
                    self.uniform.add(n.text)
                if d.nodal:
                    self.nodal.add(n.text)

    def lookup(self, env: dict[str, SSAValue], n: Name) -> SSAValue | None:
        if n.text not in self.types:
            self.err(n, f"use of undeclared variable '{n.text}'",
                     [f"declare it first, e.g. '{_suggest_type(self.types)} {n.text};'"])
            return None
        if n.text not in env:
            self.err(n, f"variable '{n.text}' is used before it is assigned",
                     ["list it after 'input' or assign it with a statement before this use"])
            return None
        if isinstance(env[n.text], _Entries):
            return self.materialize(env, n.text, self.current_block)
        return env[n.text]  # None after an earlier error on its assignment: already reported

    def materialize(self, env: dict, name: str, block: Block) -> SSAValue | None:
        """The array `name` assigned entry by entry as one value: the stack of its entries, or
        its earlier value with those entries replaced."""
        e = env[name]
        if not isinstance(e, _Entries):
            return e
        n = e.type.shape[0]  # type: ignore[attr-defined]
        missing = [k for k in range(n) if k not in e.values]
        if missing and e.base is None:
            self.err(e.at, f"'{name}' is read whole, but entr{'y' if len(missing) == 1 else 'ies'} "
                     f"{', '.join(map(str, missing[:8]))}{'...' if len(missing) > 8 else ''} of it "
                     f"{'was' if len(missing) == 1 else 'were'} never assigned",
                     ["assign every entry (or the whole array) before reading it whole"])
            env[name] = None
            return None
        if not missing:
            values = [e.values[k] for k in range(n)]
            op = self.lib.resolve("stack", [v.type for v in values], (str(n),))
            call = self.make_call(op, values, e.at)
            value = call.res
            block.add_op(call)
        else:
            value = e.base
            for k in sorted(e.values):
                op = self.lib.resolve("put", [value.type, e.values[k].type], (str(k),))
                call = self.make_call(op, [value, e.values[k]], e.at)
                block.add_op(call)
                value = call.res
        value.name_hint = ssa_hint(name)
        if name in self.uniform and not self.is_uniform(value):
            self.err(e.at, f"'{name}' is uniform, but an entry of it is given one value per element")
            env[name] = None
            return None
        if name not in self.uniform and self.is_uniform(value):
            self.err(e.at, f"'{name}' is per-element, but every entry of it is given a uniform value",
                     [f"declare it 'uniform {kas_type_of_shape(self.types[name].shape[1:]).spelling()} "
                      f"{name}[{self.types[name].shape[0]}]'"])
            env[name] = None
            return None
        env[name] = value
        return value

    def materialize_all(self, env: dict, block: Block) -> None:
        for name in [n for n, v in env.items() if isinstance(v, _Entries)]:
            self.materialize(env, name, block)

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
            if name in self.nodal:
                self.nodal_values.add(arg)
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
            if v is not None and n.text in self.nodal and v in self.top_block.args:
                self.err(n, f"the nodal input '{n.text}' is returned as it is",
                         ["a nodal output is made by 'scatter' or by a nodal statement"])
            elif v is not None and isinstance(v.type, IndexType):
                self.err(n, f"the connectivity '{n.text}' is returned", ["outputs are values, nodal or per element"])
            elif v is not None:
                outs.append(self.materialized(v, n))
            out_names.append(n.text)
        if self.errors:
            raise CompileError(self.errors)
        ret = ReturnOp(outs)
        if self.prog.outputs:
            ret.location = self.loc(self.prog.outputs[0])
        block.add_op(ret)
        program = ProgramOp(self.name, inputs, in_types, out_names, Region(block),
                            [n for n in inputs if n in self.uniform],
                            [n for n in [*inputs, *out_names] if n in self.nodal])
        if self.prog.inputs:
            program.location = self.loc(self.prog.inputs[0])
        module = ModuleOp([program])
        warnings = self.warnings(program, inputs)
        for d in self.prog.derivatives:
            if d.mode.text == "jvp" and d.loops is not None:
                self.err(d.loops, "'loops' says how reverse mode differentiates loops; forward mode carries "
                                  "the tangents through them")
                raise CompileError(self.errors)
        return FrontendResult(module, warnings, list(self.prog.derivatives), self.src)

    def statements(self, stmts: list[Statement], env: dict[str, SSAValue], block: Block) -> None:
        outer = self.current_block
        self.current_block = block
        try:
            for s in stmts:
                if isinstance(s, Call):
                    self.call(s, env, block)
                elif isinstance(s, If):
                    self.materialize_all(env, block)
                    self.branch(s, env, block)
                elif s.index is not None:
                    self.unrolled_loop(s, env, block)
                else:
                    self.materialize_all(env, block)
                    self.loop(s, env, block)
            if not self.index_values:  # (an unrolled loop's body: its entries go on to the next iteration)
                self.materialize_all(env, block)
        finally:
            self.current_block = outer

    def is_uniform(self, v: SSAValue) -> bool:
        # (answers kept for the whole build: a value's operands do not change once it is made,
        # and the uniform inputs are all known before the first statement; asked afresh, a long
        # chain made the frontend quadratic, 11 s of 1,000 statements)
        return uniform_through_calls(v, self._uniform_leaf, self.uniform_memo)

    def call(self, s: Call, env: dict[str, SSAValue | None], block: Block) -> None:
        before, old = len(self.errors), env.get(s.target.text)
        self._call(s, env, block)
        if isinstance(env.get(s.target.text), _Entries) and len(self.errors) == before:
            return
        if len(self.errors) > before or s.target.text not in env or env[s.target.text] is old:
            # Reported here, or (an operand's error) before: later uses of the target stay quiet.
            env[s.target.text] = None

    def operand(self, a: Name | Number, env: dict[str, SSAValue | None], block: Block) -> SSAValue | None:
        """A name's value, or a literal's `kas.constant`: one per number, in the program's own
        block (before the loop a literal is written in, which is added once its body is done),
        so that a loop's body holds calls only and may run inside a kernel."""
        if isinstance(a, Name):
            v = self.lookup(env, a)
            if v is not None and not self.mesh_operands and isinstance(v.type, IndexType):
                self.err(a, f"the connectivity '{a.text}' is read by 'gather' and 'scatter' only",
                         ["'Xe = gather(X, conn);', 'r = scatter(fe, conn);'"])
                return None
            return v
        if isinstance(a, Index):
            return self.entry(a, env, block)
        if isinstance(a, Text):
            self.err(a, STRING_ELSEWHERE)
            return None
        key = (a.value, math.copysign(1.0, a.value))  # (0.0 and -0.0 are equal, and two constants)
        if key not in self.constants:
            const = ConstantOp(a.value)
            const.location = self.loc(a)  # type: ignore[arg-type]
            self.top_block.add_op(const)
            self.constants[key] = const.res
        return self.constants[key]

    def _call(self, s: Call, env: dict[str, SSAValue | None], block: Block) -> None:
        if s.op.text == COPY:
            self.copy(s, env, block)
            return
        if s.op.text in CONNECTIVITY_CALLS:
            self.connectivity_call(s, env, block)
            return
        if is_reduction(s.op.text, len(s.args)):
            if isinstance(s.target, Index):
                self.err(s.target, f"'{s.op.text}' reduces over the batch into a uniform variable, not an array's "
                         "entry")
                return
            self.reduction(s, env, block)
            return
        op = self.lib.get(s.op.text) if self.lib.family(s.op.text) is None else None
        target_type = self.target_type(s.target)
        if target_type is None and s.target.text not in self.types:
            self.err(s.target, f"assignment to undeclared variable '{s.target.text}'",
                     [f"declare it first, e.g. '{_suggest_type(self.types)} {s.target.text};'"])
        if op is None and self.lib.family(s.op.text) is not None:
            self.family_call(s, env, block, target_type)
            return
        if op is None or len(s.args) != len(op.operand_types):
            for a in s.args:
                if isinstance(a, (Name, Index)):
                    self.operand(a, env, block)
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
        self.assign(s, op.name, args, op.result_type, env, block)  # type: ignore[arg-type]

    def connectivity_call(self, s: Call, env: dict, block: Block) -> None:
        """`Xe = gather(X, conn);` or `r = scatter(fe, conn);` (see the module's docstring)."""
        what = s.op.text
        if len(s.args) != 2:
            self.err(s.op, f"'{what}' takes 2 operands, got {len(s.args)}",
                     ["'Xe = gather(X, conn);'" if what == "gather" else "'r = scatter(fe, conn);'"])
            return
        if what == "scatter" and (block is not self.top_block or self.index_values or self.branches):
            self.err(s.op, "'scatter' is a statement of the program's top level, not of a loop or a branch",
                     ["scatter after the loop or the 'if' the value it makes"])
            return
        if isinstance(s.target, Index) or any(not isinstance(a, Name) for a in s.args):
            at = s.target if isinstance(s.target, Index) else next(a for a in s.args if not isinstance(a, Name))
            self.err(at, f"'{what}' reads and assigns whole variables (no numbers, strings or array entries)")
            return
        target_type = self.target_type(s.target)
        if target_type is None:
            self.err(s.target, f"assignment to undeclared variable '{s.target.text}'",
                     [f"declare it first, e.g. '{'matrix4x3' if what == 'gather' else 'nodal vector3'} "
                      f"{s.target.text};'"])
            return
        self.mesh_operands = True
        try:
            source, index = (self.operand(a, env, block) for a in s.args)
        finally:
            self.mesh_operands = False
        if source is None or index is None:
            return
        src, conn = s.args
        if not isinstance(index.type, IndexType):
            self.err(conn, f"the second operand of '{what}' is a connectivity (indexK), but '{conn.text}' is "
                     f"{index.type.spelling()}")  # type: ignore[attr-defined]
            return
        count = index.type.count.data
        if what == "gather":
            if source not in self.nodal_values:
                self.err(src, f"'gather' reads a nodal value, but '{src.text}' is not nodal",
                         [f"declare it 'nodal {source.type.spelling()} {src.text};' and list it after 'input'"])  # type: ignore
                return
            if s.target.text in self.nodal or s.target.text in self.uniform:
                self.err(s.target, f"'gather' gives one value per element, but '{s.target.text}' is "
                         f"{'nodal' if s.target.text in self.nodal else 'uniform'}")
                return
            if len(source.type.shape) >= MAX_AXES:  # type: ignore[attr-defined]
                self.err(src, f"'gather' of {source.type.spelling()} '{src.text}' through index{count} would give "  # type: ignore
                         f"a value of {len(source.type.shape) + 1} axes (K rows of the node's value); values have at "  # type: ignore
                         f"most {MAX_AXES}", ["gather nodal values of at most 3 axes"])
                return
            want = kas_type_of_shape((count, *source.type.shape))  # type: ignore[attr-defined]
            if target_type != want:
                self.err(s.target, f"'gather' of {source.type.spelling()} '{src.text}' through index{count} "  # type: ignore
                         f"gives {want.spelling()}, but '{s.target.text}' is {target_type.spelling()}")
                return
            op: GatherOp | ScatterOp = GatherOp(source, index)
        else:
            if s.target.text not in self.nodal:
                self.err(s.target, f"'scatter' gives one value per node, but '{s.target.text}' is not nodal",
                         [f"declare it 'nodal {target_type.spelling()} {s.target.text};'"])
                return
            if s.target.text in self.prog_input_names():
                self.err(s.target, f"'{s.target.text}' is an input; 'scatter' makes a nodal output")
                return
            if source in self.nodal_values or self.is_uniform(source):
                self.err(src, f"'scatter' adds a per-element value, but '{src.text}' is "
                         f"{'nodal' if source in self.nodal_values else 'uniform'}")
                return
            shape = tuple(source.type.shape)  # type: ignore[attr-defined]
            if not shape or shape[0] != count or isinstance(source.type, MaskType):
                self.err(src, f"'scatter' through index{count} adds {count} rows per element, but '{src.text}' is "
                         f"{source.type.spelling()}")  # type: ignore[attr-defined]
                return
            if target_type != kas_type_of_shape(shape[1:]):
                self.err(s.target, f"'scatter' of {source.type.spelling()} '{src.text}' gives "  # type: ignore
                         f"{kas_type_of_shape(shape[1:]).spelling()} per node, but '{s.target.text}' is "
                         f"{target_type.spelling()}")
                return
            op = ScatterOp(self.materialized(source, src), index)
        op.location = self.loc(s.target)
        op.res.name_hint = ssa_hint(s.target.text)
        # A gather reads inputs only: inside a loop it is the same every iteration, so it runs
        # once, before the loops around it (and before a branch, whose sides both run anyway).
        (self.top_block if isinstance(op, GatherOp) else block).add_op(op)
        env[s.target.text] = op.res
        if isinstance(op, ScatterOp):
            self.nodal_values.add(op.res)

    def materialized(self, v: SSAValue, at: Name | Loop, block: Block | None = None) -> SSAValue:
        """`v`, or where it is a gather's value, `scale(v, 1)` (exact for every number, NaN and
        -0 included) added to `block` (the top one by default): a kernel gathers as it loads,
        so what a scatter, the host or a loop's next iteration reads must be a kernel's result."""
        if not isinstance(v.owner, GatherOp):
            return v
        op = self.lib.resolve("scale", [v.type, ScalarType()])
        call = self.make_call(op, [v, self.operand(Number("1", 1.0, at.pos), {}, self.top_block)], at)
        (block or self.top_block).add_op(call)
        return call.res

    def prog_input_names(self) -> set[str]:
        return {n.text for n in self.prog.inputs}

    def copy(self, s: Call, env: dict, block: Block) -> None:
        """`x = y;`: the variable (or the array's entry) takes the value `y` holds; no call."""
        target_type = self.target_type(s.target)
        if target_type is None and s.target.text not in self.types:
            self.err(s.target, f"assignment to undeclared variable '{s.target.text}'",
                     [f"declare it first, e.g. '{_suggest_type(self.types)} {s.target.text};'"])
        value = self.operand(s.args[0], env, block)
        if value is None or target_type is None:
            return
        if value.type != target_type:
            self.err(s.args[0], f"'{s.target.text}{_index_text(s.target)}' is {target_type.spelling()}, but "
                     f"'{s.args[0].text}' is {value.type.spelling()}")  # type: ignore[attr-defined]
            return
        self.assign(s, None, [value], target_type, env, block)

    def assign(self, s: Call, op_name: str | None, args: list[SSAValue], result: KasType, env: dict, block: Block,
               operands: list | None = None) -> None:
        """The statement's call made and its value given to its variable (or to its array's
        entry at the loop index: the array with that entry replaced), when the value is what
        the variable holds (uniform or per element)."""
        operands = operands if operands is not None else s.args
        nodal = self.nodal_statement(s, operands, args, result, block)
        if nodal is None:
            return
        per_element = next((a for a, v in zip(operands, args) if not self.is_uniform(v)), None)
        value_uniform = per_element is None
        if isinstance(s.target, Index):
            k = self.index_value(s.target.index)
            array_type = self.types.get(s.target.text)
            if k is None or array_type is None:
                return
            if k >= array_type.shape[0]:  # type: ignore[attr-defined]
                self.err(s.target, f"'{s.target.text}[{s.target.index.text}]' assigns entry {k}, but "
                         f"'{s.target.text}' has {array_type.shape[0]} entries")  # type: ignore[attr-defined]
                return
            if s.target.text in self.uniform and not value_uniform:
                self.check_target(s, False, per_element)
                return
        elif not self.check_target(s, value_uniform, per_element):
            return
        if op_name is None:  # a copy
            value = args[0]
        else:
            call = CallOp(op_name, args, result)
            call.location = self.loc(s.target)
            call.res.name_hint = ssa_hint(s.target.text if isinstance(s.target, Name) else f"{s.target.text}_entry")
            self.call_targets[call] = s.target
            block.add_op(call)
            value = call.res
        if isinstance(s.target, Index):
            current = env.get(s.target.text)
            if not isinstance(current, _Entries):
                current = _Entries(array_type, current, {}, s.target)
            current.values[k] = value
            env[s.target.text] = current
            return
        env[s.target.text] = value
        if nodal:
            self.nodal_values.add(value)

    def nodal_statement(self, s: Call, operands: list, args: list[SSAValue], result: KasType, block: Block
                        ) -> bool | None:
        """Whether the statement runs once per node (it reads a nodal value); None, with an
        error at the statement, where its operands or its variable disagree on that: a
        statement reads nodal and uniform values into a nodal variable, at the top level, or
        per-element and uniform ones into a variable that is not nodal."""
        t = s.target.text
        nodal_at = next((a for a, v in zip(operands, args) if v in self.nodal_values), None)
        nested = block is not self.top_block or self.index_values or self.branches or self.enclosing_trips
        if nested and (nodal_at is not None or t in self.nodal):
            # (first: in a loop a nodal variable's value is the loop's own, which is not nodal, and
            # the message below would blame the value)
            self.err(s.target, "a statement on nodal values stands at the program's top level, not in a loop or a "
                     "branch")
            return None
        if nodal_at is None:
            if t in self.nodal:
                self.err(s.target, f"'{t}' is nodal, but its value here is not: a nodal variable holds a scatter's "
                         "sums or a value computed from nodal ones",
                         ["declare it without 'nodal', or compute it from nodal values"])
                return None
            return False
        element_at = next((a for a, v in zip(operands, args) if v not in self.nodal_values and not self.is_uniform(v)),
                          None)
        if element_at is not None:
            self.err(element_at, f"'{element_at.text}' holds one value per element, but '{nodal_at.text}' one per "
                     "node: a statement runs per element or per node", ["gather the nodal value into a per-element "
                                                                        "one first: 'Xe = gather(X, conn);'"])
            return None
        if isinstance(s.target, Index) and t in self.nodal:
            self.err(s.target, f"'{t}[{s.target.index.text}]': an entry of the nodal '{t}' is not assigned on its own; "
                     "a statement on nodal values gives a whole value",
                     [f"build it whole from its entries, e.g. '{t} = stack(a, b, ...);'"])
            return None
        if isinstance(s.target, Index) or t not in self.nodal:
            self.err(s.target, f"'{s.op.text}' of the nodal '{nodal_at.text}' gives one value per node, but "
                     f"'{t}' is not nodal", [f"declare it 'nodal {result.spelling()} {t};'"])
            return None
        return True

    def make_call(self, op, args: list[SSAValue], at) -> CallOp:
        call = CallOp(op.name, args, op.result_type)
        call.location = self.loc(at)
        if isinstance(at, (Name, Index)):
            call.res.name_hint = ssa_hint(at.text)
        return call

    def target_type(self, target: Name | Index) -> KasType | None:
        """The type a statement's value must have: its variable's, or an entry's of its array."""
        t = self.types.get(target.text)
        if t is None or isinstance(target, Name):
            return t
        if not t.shape:
            self.err(target, f"'{target.text}' is {t.spelling()}, which has no entries to index")
            return None
        return kas_type_of_shape(t.shape[1:])

    def index_value(self, index: Name | Number) -> int | None:
        if isinstance(index, Number):
            return int(index.value)
        k = self.index_values.get(index.text)
        if k is None:
            self.err(index, f"'{index.text}' is not the index of a loop around this statement",
                     ["an array's entry is read or assigned at the index of an enclosing 'loop q N { ... }'"])
        return k

    def entry(self, a: Index, env: dict, block: Block) -> SSAValue | None:
        """Entry `a.index` of the array `a.name` at the loop index's current value: an `item`
        call (the loop runs unrolled)."""
        k = self.index_value(a.index)
        current = env.get(a.text)
        if isinstance(current, _Entries) and k is not None:
            if k in current.values:
                return current.values[k]
            if current.base is None:
                self.err(a, f"entry {k} of '{a.text}' is read before it is assigned")
                return None
            array = current.base
        else:
            array = self.lookup(env, a.name)
        if array is None or k is None:
            return None
        t = array.type
        if not t.shape or isinstance(t, MaskType):  # type: ignore[attr-defined]
            self.err(a, f"'{a.text}' is {t.spelling()}, which has no entries to index")  # type: ignore[attr-defined]
            return None
        if k >= t.shape[0]:  # type: ignore[attr-defined]
            self.err(a.index, f"'{a.text}[{a.index.text}]' reads entry {k}, but '{a.text}' has "
                     f"{t.shape[0]} entries")  # type: ignore[attr-defined]
            return None
        op = self.lib.resolve("item", [t], (str(k),))  # type: ignore[list-item]
        call = self.make_call(op, [array], a)
        call.res.name_hint = ssa_hint(f"{a.text}_at{k}")
        block.add_op(call)
        if array in self.nodal_values:  # an entry of a nodal value is one per node too
            self.nodal_values.add(call.res)
        return call.res

    def family_call(self, s: Call, env: dict, block: Block, target_type: KasType | None) -> None:
        """A call of a generic op (`irfuse.library.families`): resolved by its operands' types."""
        operands, params = list(s.args), ()
        family = self.lib.family(s.op.text)
        if s.op.text in STRING_FIRST:
            if not operands or not isinstance(operands[0], Text):
                self.err(s.op, STRING_FIRST[s.op.text], [f"signature: {family.signature}"])  # type: ignore
                return
            try:
                params = string_params(s.op.text, operands[0].text, len(operands) - 1)
            except DefinitionError as e:
                self.err(operands[0], str(e))
                return
            operands = operands[1:]
        values = [self.operand(a, env, block) for a in operands]
        if any(v is None for v in values):
            return
        try:
            op = self.lib.resolve(s.op.text, [v.type for v in values], params)  # type: ignore[union-attr]
        except DefinitionError as e:
            self.err(s.op, f"{e}", ["operands: " + ", ".join(
                f"'{getattr(a, 'text', a)}' {v.type.spelling()}" for a, v in zip(operands, values))])  # type: ignore
            return
        if target_type is not None and target_type != op.result_type:
            self.err(s.target, f"'{s.op.text}' of these operands gives {op.result_type.spelling()}, but "
                     f"'{s.target.text}{'[' + s.target.index.text + ']' if isinstance(s.target, Index) else ''}' "
                     f"is {target_type.spelling()}", [f"signature: {family.signature}"])  # type: ignore
            return
        if target_type is None:
            return
        self.assign(s, op.name, values, op.result_type, env, block, operands)  # type: ignore[arg-type]

    def condition(self, c: Condition, env: dict, block: Block) -> SSAValue | None:
        """A branch's condition as a mask: a mask variable or an op's call giving one, or a
        comparison's."""
        if c.op is None:
            v = self.condition_operand(c.lhs, env, block)
            if v is not None and not isinstance(v.type, MaskType):
                self.err(c.lhs, f"a condition is a mask or a comparison, and '{getattr(c.lhs, 'text', '')}' is "
                         f"{v.type.spelling()}",  # type: ignore[attr-defined]
                         ["write 'if (x > 0)', 'if (gt(x, 0))', or compare into a mask: 'm = gt(x, 0);'"])
                return None
            return v
        a, b = self.condition_operand(c.lhs, env, block), self.condition_operand(c.rhs, env, block)  # type: ignore
        if a is None or b is None:
            return None
        try:
            op = self.lib.resolve(COMPARISONS[c.op], [a.type, b.type])
        except DefinitionError as e:
            self.err(c.lhs, f"'{c.op}' compares scalars: {e}")
            return None
        call = self.make_call(op, [a, b], c)
        call.res.name_hint = "cond"
        block.add_op(call)
        return call.res

    def condition_operand(self, e, env: dict, block: Block) -> SSAValue | None:
        """An operand of a condition's: an operand's value, or an op's call (its operands
        first), added to `block`."""
        if not isinstance(e, CallExpr):
            return self.operand(e, env, block)
        args = [self.condition_operand(a, env, block) for a in e.args]
        if any(a is None for a in args):
            return None
        try:
            op = self.lib.resolve(e.op.text, [a.type for a in args])  # type: ignore[union-attr]
        except DefinitionError as err:
            self.err(e.op, f"'{e.op.text}' in a condition: {err}")
            return None
        if op is None or is_reduction(e.op.text, len(args)) or e.op.text in CONNECTIVITY_CALLS:
            close = self.lib.closest(e.op.text)
            self.err(e.op, f"unknown op '{e.op.text}' in a condition",
                     [f"did you mean {', '.join(repr(c) for c in close)}?"] if close else
                     ["a condition calls ops of the library ('irfuse ops' lists them)"])
            return None
        if len(args) != len(op.operand_types) or any(a.type != t for a, t in zip(args, op.operand_types)):  # type: ignore
            self.err(e.op, f"'{e.op.text}' in a condition takes {op.signature()}, not "
                     f"({', '.join(a.type.spelling() for a in args)})")  # type: ignore[union-attr]
            return None
        call = self.make_call(op, args, e.op)  # type: ignore[arg-type]
        call.res.name_hint = "cond"
        block.add_op(call)
        return call.res

    def branch(self, s: If, env: dict, block: Block) -> None:
        """Both branches computed, then each variable either assigns takes the value of the
        branch the condition picks, element by element (`select`)."""
        before = len(self.errors)
        cond = self.condition(s.condition, env, block)
        sides = []
        self.branches += 1
        try:
            for branch in (s.then, s.orelse):
                inner = dict(env)
                self.statements(branch, inner, block)
                sides.append(inner)
        finally:
            self.branches -= 1
        for n in _assigned(s.then) + [x for x in _assigned(s.orelse) if x not in _assigned(s.then)]:
            a, b = sides[0].get(n), sides[1].get(n)
            if n not in env and (n not in sides[0] or n not in sides[1]):
                continue  # a branch's own temporary: no value after the 'if' (a later read is an error)
            if cond is None or a is None or b is None or len(self.errors) > before:
                env[n] = None
                continue
            if a is b:
                env[n] = a
                continue
            op = self.lib.resolve("select", [cond.type, a.type, b.type])
            call = self.make_call(op, [cond, a, b], s)
            call.res.name_hint = ssa_hint(n)
            uniform = all(self.is_uniform(v) for v in (cond, a, b))
            if n in self.uniform and not uniform:
                self.err(s, f"'{n}' is uniform, but the 'if' on a per-element condition gives it one value per "
                         "element", ["a uniform variable holds one value for the whole batch"])
                env[n] = None
                continue
            block.add_op(call)
            env[n] = call.res

    def unrolled_loop(self, s: Loop, env: dict, block: Block) -> None:
        """`loop q N { ... }`: the body once for each q in 0..N-1, in order (straight-line code:
        reading and assigning arrays at q needs q known)."""
        q = s.index
        assert q is not None
        if q.text in self.types or q.text in self.index_values:
            self.err(q, f"the loop index '{q.text}' is already the name of a "
                     f"{'variable' if q.text in self.types else 'loop index around it'}")
            return
        size = _statement_count(s.body)
        self.unrolled += s.count * size
        if self.unrolled > MAX_UNROLLED_STATEMENTS:
            self.err(s, f"unrolling this loop ({s.count} x {size} statements) makes the program's unrolled loops "
                     f"{self.unrolled:,} statements; at most {MAX_UNROLLED_STATEMENTS:,} are allowed",
                     ["an indexed loop runs unrolled: its index must be known to pick an array's entry"])
            raise CompileError(self.errors)
        try:
            for k in range(s.count):
                self.index_values[q.text] = k
                before = len(self.errors)
                self.statements(s.body, env, block)
                if len(self.errors) > before:
                    break  # (the next iterations would say the same)
        finally:
            del self.index_values[q.text]

    def check_target(self, s: Call, uniform: bool, per_element: Name | Number | None = None) -> bool:
        """Whether the statement's value (uniform or not) is what its variable holds; an error
        at the statement when not."""
        t = s.target.text
        if uniform and t not in self.uniform:
            what = (f"'{s.op.text}' reduces over the batch" if is_reduction(s.op.text, len(s.args))
                    else f"'{s.args[0].text}' is uniform" if s.op.text == COPY  # type: ignore[union-attr]
                    else f"'{s.op.text}' of uniform operands only")
            self.err(s.target, f"{what}: its value is one for the whole batch, but '{t}' is per-element",
                     [f"declare it 'uniform {self.types[t].spelling()} {t};'"])
            return False
        if t in self.uniform and self.enclosing_trips:  # (said first: inside a loop it would read per element)
            self.err(s.target, f"'{t}' is uniform and cannot be assigned inside a loop",
                     ["loops carry per-element values; compute the uniform value before the loop"])
            return False
        if not uniform and t in self.uniform:
            self.err(s.target, f"'{t}' is uniform, but " + (
                     f"'{per_element.text}' holds one value per element" if s.op.text == COPY  # type: ignore
                     else f"'{s.op.text}' of the per-element '{per_element.text}' gives one value per element"),  # type: ignore
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
        # (an entry, `sum(v[0])`, is its `item` call's value: the array itself was reduced before)
        v = self.entry(a, env, block) if isinstance(a, Index) else self.lookup(env, a)
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
        body.add_op(YieldOp([self.materialized(inner[n], s, body) for n in results]))
        loop = LoopOp(s.count, [self.materialized(env[n], s, block) for n in carried],
                      [self.types[n] for n in results],
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


def _statement_count(stmts: list[Statement]) -> int:
    """Calls a statement list makes once run (loops' bodies counted by their iterations)."""
    total = 0
    for s in stmts:
        if isinstance(s, Call):
            total += 1
        elif isinstance(s, If):
            total += _statement_count(s.then) + _statement_count(s.orelse) + 1
        else:
            total += s.count * _statement_count(s.body) if s.index is not None else _statement_count(s.body)
    return total


def _index_text(target: Name | Index) -> str:
    return f"[{target.index.text}]" if isinstance(target, Index) else ""


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
