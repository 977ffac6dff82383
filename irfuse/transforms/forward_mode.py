"""Forward mode: a `kas.program` turned into the program of its outputs and their tangents.

`forward_derivative(program, wrt)` builds program `<name>_jvp`: the inputs, then one tangent
input `d<x>` for each input x in `wrt` (uniform or nodal as x is); the outputs, then one
tangent output `d<y>` for each output y (the change of y for those input changes). Its
statements are the program's own, each followed by its tangent:

- a call of op f whose operands have tangents: a call of the derived op `jvp_<mask>__f`
  (`library.derivatives`: f's Jacobian-vector product from f's definition), given f's
  operands and the tangents of those the mask picks; none where the derived op's entries are
  all 0 (a comparison, `sign`: steps);
- `sum` over the batch: the sum of the tangent; `max` (`min`): the largest (smallest) tangent
  among the elements that attain the maximum (minimum), which is the maximum's one-sided
  derivative along the tangent: deterministic, ties included (`ifeq` picks them, the other
  elements give the smallest (largest) tangent of the batch, a value that cannot win);
- a gather (scatter): the gather (scatter) of the tangent through the same connectivity;
- a loop: the tangents of its carried values are carried too (those that have one on entry
  or gain one in the body, found by a fixed point), a tangent of a value read after the loop
  is one of its results;
- constants, masks and connectivities have none.

A tangent holds one value per element, per node or for the batch as its value does (the
derived call reads the value's operands); an output or a carried value without a tangent
gets `zeros` of its value (a call reading it, so it lives where the value lives). Every new
statement keeps the location of the statement it derives from.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Operation, Region, SSAValue

from irfuse.diagnostics import CompileError, UsageError, located
from irfuse.dialects.kas import (CallOp, ConstantOp, GatherOp, IndexType, LoopOp, MaskType, ProgramOp, ReduceKind,
                                 ReduceOp, ReturnOp, ScatterOp, TableOp, YieldOp, ssa_hint, variable_of_hint)
from irfuse.library.derivatives import jvp_name


def differentiable(v: SSAValue) -> bool:
    """Whether a value has derivatives (masks and connectivities have none)."""
    return not isinstance(v.type, (MaskType, IndexType))


class DerivativeBuilder:
    """What building a derivative program needs in either mode: ops added with the location
    of the statement they derive from, derivatives named with a prefix."""

    def __init__(self, library, prefix: str):
        self.lib = library
        self.prefix = prefix

    def emit(self, block: Block, op: Operation, like: Operation) -> Operation:
        op.location = like.location
        block.add_op(op)
        return op

    def hint(self, v: SSAValue) -> str | None:
        """The name a derivative of `v` prints with: the prefix and `v`'s name."""
        return ssa_hint(self.prefix + variable_of_hint(v.name_hint)) if v.name_hint else None


class _Builder(DerivativeBuilder):
    """Copies a program's statements into a new block, each followed by its tangent."""

    def __init__(self, library, prefix: str):
        super().__init__(library, prefix)
        self.value: dict[SSAValue, SSAValue] = {}  # old value -> its copy
        self.tangent: dict[SSAValue, SSAValue] = {}  # old value -> the copy's tangent

    def call(self, block: Block, name: str, args: Sequence[SSAValue], like: Operation, hint: str | None):
        op = self.lib.get(name)
        if op is None:
            raise CompileError(located(f"'{name}' is not an op of the library", like.location))
        new = self.emit(block, CallOp(name, args, op.result_type), like)
        new.res.name_hint = hint
        return new.res

    def zeros(self, block: Block, value: SSAValue, like: Operation) -> SSAValue:
        """Zeros of `value`'s type where `value` lives (a call reading it)."""
        op = self.lib.resolve("zeros", [value.type])
        return self.call(block, op.name, [value], like, None)

    def statements(self, ops: Sequence[Operation], block: Block) -> None:
        for op in ops:
            if isinstance(op, CallOp):
                self.call_op(op, block)
            elif isinstance(op, (ConstantOp, TableOp)):  # (literals: no tangent)
                self.value[op.res] = self.emit(block, op.clone(), op).res
            elif isinstance(op, ReduceOp):
                self.reduce_op(op, block)
            elif isinstance(op, (GatherOp, ScatterOp)):
                # Linear in the value moved: its tangent moves through the same connectivity.
                moved, index = op.operands[0], self.value[op.index]
                new = self.emit(block, type(op)(self.value[moved], index), op)
                new.res.name_hint = op.res.name_hint
                self.value[op.res] = new.res
                if moved in self.tangent:
                    t = self.emit(block, type(op)(self.tangent[moved], index), op)
                    t.res.name_hint = self.hint(op.res)
                    self.tangent[op.res] = t.res
            elif isinstance(op, LoopOp):
                self.loop_op(op, block)
            else:
                raise CompileError(located(f"kas-jvp: no derivative of {op.name}", op.location))

    def call_op(self, op: CallOp, block: Block) -> None:
        args = [self.value[a] for a in op.args]
        new = self.emit(block, CallOp(op.op_name, args, op.res.type), op)
        new.res.name_hint = op.res.name_hint
        self.value[op.res] = new.res
        self.call_tangent(op, args, block)

    def call_tangent(self, op: CallOp, args: list[SSAValue], block: Block) -> None:
        """The tangent of call `op` (its copy's operands `args`), where its operands have one."""
        mask = [a in self.tangent for a in op.args]
        if not any(mask) or not differentiable(op.res):
            return
        name = jvp_name(op.op_name, mask)
        derived = self.lib.get(name)
        if derived is None:
            raise CompileError(located(f"kas-jvp: '{op.op_name}' has no derivative along operands "
                                       f"{[k for k, m in enumerate(mask) if m]}", op.location))
        if all(getattr(t, "value", None) == 0 for t in derived.trees):
            return  # a step: its change is 0 wherever it is defined
        # The derived op takes the operands its derivative reads (named as the op's; its
        # tangents' names differ from them all), then the tangents.
        base = self.lib.get(op.op_name)
        read = [a for a, n in zip(args, base.operand_names) if n in derived.operand_names]
        tangents = [self.tangent[a] for a, m in zip(op.args, mask) if m]
        self.tangent[op.res] = self.call(block, name, read + tangents, op, self.hint(op.res))

    def reduce_op(self, op: ReduceOp, block: Block) -> None:
        new = self.emit(block, ReduceOp(op.reduce_kind, self.value[op.operand]), op)
        new.res.name_hint = op.res.name_hint
        self.value[op.res] = new.res
        t = self.tangent.get(op.operand)
        if t is None:
            return
        kind = op.reduce_kind
        if kind == ReduceKind.SUM:
            self.tangent[op.res] = self.emit(block, ReduceOp(kind, t), op).res
            self.tangent[op.res].name_hint = self.hint(op.res)
            return
        # The one-sided derivative of max (min) along t: the largest (smallest) t where the
        # maximum (minimum) is attained; elsewhere the batch's smallest (largest) t.
        other = ReduceKind.MIN if kind == ReduceKind.MAX else ReduceKind.MAX
        fill = self.emit(block, ReduceOp(other, t), op).res
        pick = self.lib.resolve("ifeq", [op.operand.type] * 4).name
        picked = self.call(block, pick, [self.value[op.operand], new.res, t, fill], op, None)
        self.tangent[op.res] = self.emit(block, ReduceOp(kind, picked), op).res
        self.tangent[op.res].name_hint = self.hint(op.res)

    def loop_op(self, loop: LoopOp, block: Block) -> None:
        old = loop.body.block
        n_iter = len(loop.iter_args)
        term = old.last_op
        assert isinstance(term, YieldOp)
        # The carried values with a tangent: those with one on entry, then those the body
        # gives one, until none is added.
        active = {k for k, v in enumerate(loop.iter_args) if v in self.tangent and differentiable(v)}
        inner = [op for op in old.ops if not isinstance(op, YieldOp)]
        while True:
            reach = set(self.tangent) | {old.args[k] for k in active}
            _reach(inner, reach)
            grown = active | {k for k in range(n_iter) if term.values[k] in reach and differentiable(old.args[k])}
            if grown == active:
                break
            active = grown
        carried = sorted(active)
        inits = [self.value[v] for v in loop.iter_args]
        tangent_inits = []
        for k in carried:
            v = loop.iter_args[k]
            tangent_inits.append(self.tangent[v] if v in self.tangent else self.zeros(block, self.value[v], loop))
        new_block = Block(arg_types=[a.type for a in old.args] + [old.args[k].type for k in carried])
        for a, b in zip(old.args, new_block.args):
            b.name_hint = a.name_hint
            self.value[a] = b
        for k, b in zip(carried, new_block.args[n_iter:]):
            b.name_hint = self.hint(old.args[k])
            self.tangent[old.args[k]] = b
        self.statements(inner, new_block)
        extras = [k for k in range(n_iter, len(loop.res)) if term.values[k] in self.tangent]
        yields = [self.value[v] for v in term.values[:n_iter]]
        for k in carried:
            v = term.values[k]
            yields.append(self.tangent[v] if v in self.tangent else self.zeros(new_block, self.value[v], term))
        yields += [self.value[v] for v in term.values[n_iter:]] + [self.tangent[term.values[k]] for k in extras]
        self.emit(new_block, YieldOp(yields), term)
        types = ([r.type for r in loop.res[:n_iter]] + [loop.res[k].type for k in carried]
                 + [r.type for r in loop.res[n_iter:]] + [loop.res[k].type for k in extras])
        new = self.emit(block, LoopOp(loop.trip_count.data, inits + tangent_inits, types, Region(new_block)), loop)
        # The new loop's results: the carried values, their tangents, the values only read
        # after the loop, their tangents.
        results = list(new.res)
        tangents_at, later_at = n_iter, n_iter + len(carried)
        later_tangents_at = later_at + len(loop.res) - n_iter
        for r, p in zip(loop.res, results[:tangents_at] + results[later_at:later_tangents_at]):
            p.name_hint = r.name_hint
            self.value[r] = p
        for k, t in [*zip(carried, results[tangents_at:later_at]), *zip(extras, results[later_tangents_at:])]:
            t.name_hint = self.hint(loop.res[k])
            self.tangent[loop.res[k]] = t


def _reach(ops: Sequence[Operation], has: set[SSAValue]) -> None:
    """Adds to `has` the values of `ops` that get a tangent when the values in `has` have one
    (an over-approximation: a step's result counts), nested loops by their fixed point."""
    for op in ops:
        if isinstance(op, LoopOp):
            args, term = op.body.block.args, op.body.block.last_op
            n = len(op.iter_args)
            active = {k for k, v in enumerate(op.iter_args) if v in has and differentiable(v)}
            while True:
                inner = has | {args[k] for k in active}
                _reach([o for o in op.body.block.ops if not isinstance(o, YieldOp)], inner)
                grown = active | {k for k in range(n) if term.values[k] in inner and differentiable(args[k])}
                if grown == active:
                    break
                active = grown
            has.update(r for r, v in zip(op.res, term.values) if v in inner and differentiable(r))
        elif not isinstance(op, (ConstantOp, TableOp)) and any(v in has for v in op.operands if differentiable(v)):
            has.update(r for r in op.results if differentiable(r))


def check_derivative_names(program: ProgramOp, wrt: Sequence[str], prefix: str, where: str, what: str,
                           made: Sequence[str]) -> None:
    """UsageError unless `wrt` names differentiable inputs, once each, and the names `made`
    (the derivatives' inputs and outputs) are new: what forward and reverse mode check."""
    inputs, args = program.inputs, program.body.block.args
    if not wrt:
        raise UsageError(f"{where}: name the inputs to differentiate (wrt=...); its inputs: {', '.join(inputs)}")
    for name in wrt:
        if name not in inputs:
            raise UsageError(f"{where}: '{name}' is not an input (its inputs: {', '.join(inputs)})")
        if not differentiable(args[inputs.index(name)]):
            raise UsageError(f"{where}: '{name}' is a {args[inputs.index(name)].type}, which has no derivative")
    if len(set(wrt)) != len(wrt):
        raise UsageError(f"{where}: an input is named twice in wrt")
    if not prefix.isidentifier():
        raise UsageError(f"{where}: the {what}s' prefix '{prefix}' is not a name")
    taken = set(inputs) | set(program.outputs)
    for name in made:
        if name in taken:
            raise UsageError(f"{where}: the {what} '{name}' would have the name of an input or output; "
                             "choose another prefix")


def forward_derivative(program: ProgramOp, wrt: Sequence[str], library, prefix: str = "d",
                       who: str = "kas-jvp") -> ProgramOp:
    """The program of `program`'s outputs and their tangents along the inputs `wrt` (see the
    module's docstring); UsageError for a `wrt` that is not a differentiable input (`who`
    asked: the pass, a `derivative` line)."""
    where = f"{who} on @{program.sym_name.data}"
    inputs, outputs = program.inputs, program.outputs
    check_derivative_names(program, wrt, prefix, where, "tangent",
                           [prefix + n for n in inputs if n in wrt] +
                           [prefix + n for n, v in zip(outputs, program.return_op.values) if differentiable(v)])
    picked = [name in wrt for name in inputs]
    in_tangents = [prefix + n for n in inputs if n in wrt]
    ret = program.return_op
    # (a mask output has no tangent)
    out_tangents = [prefix + n for n, v in zip(outputs, ret.values) if differentiable(v)]
    args = program.body.block.args
    tangent_types = [a.type for a, p in zip(args, picked) if p]
    block = Block(arg_types=[a.type for a in args] + tangent_types)
    b = _Builder(library, prefix)
    for a, new in zip(args, block.args):
        new.name_hint = a.name_hint
        b.value[a] = new
    for a, new, name in zip([a for a, p in zip(args, picked) if p], block.args[len(args):], in_tangents):
        new.name_hint = ssa_hint(name)
        b.tangent[a] = new
    b.statements([op for op in program.body.block.ops if not isinstance(op, ReturnOp)], block)
    results = [b.value[v] for v in ret.values]
    for v in ret.values:
        if differentiable(v):
            results.append(b.tangent[v] if v in b.tangent else b.zeros(block, b.value[v], ret))
    b.emit(block, ReturnOp(results), ret)
    uniform = program.uniform + [prefix + n for n in inputs if n in wrt and n in program.uniform]
    nodal = program.nodal + [prefix + n for n in inputs if n in program.nodal and n in wrt]
    nodal += [prefix + n for n in outputs if n in program.nodal and prefix + n in out_tangents]
    new = ProgramOp(f"{program.sym_name.data}_jvp", list(inputs) + in_tangents, block.arg_types,
                    list(outputs) + out_tangents, Region(block), uniform=uniform, nodal=nodal)
    new.location = program.location
    return new
