"""Reverse mode: a `kas.program` turned into the program of its outputs and the cotangents of
its inputs (a vector-Jacobian product), or the gradient of one uniform scalar output.

`reverse_derivative(program, wrt, seeds)` builds program `<name>_vjp` (or `_grad`): the
program's own statements (loops unrolled, below), then the adjoint sweep in reverse order,
each statement's operands getting their share of its result's cotangent:

- a call of op f: for each operand k that depends on a `wrt` input, a call of the derived op
  `vjp_<k>__f` (`library.derivatives`: operand k's share, from f's partial derivatives),
  given the operands it reads and the result's cotangent; shares of one value are added
  (`add`); a uniform operand of per-element calls gets the batch's sum of its shares, one
  reduction of their per-element sum (of a nodal statement's, the sum over the nodes);
- `sum` over the batch: its cotangent, the same for every element; `max` (`min`): its
  cotangent shared equally by the elements that attain the maximum (`ifeq` picks them, a sum
  counts them): deterministic, ties included;
- a gather: the scatter of its cotangent (each node the sum of its elements' rows, in the
  fixed order of every scatter); a scatter: the gather of its cotangent;
- a loop is unrolled first (its carried values are then plain values, each iteration's kept
  for the sweep): what a quadrature loop needs; a loop of more than `MAX_UNROLLED` statements
  unrolled is refused (storing the carried state per iteration in a loop of its own, or
  recomputing it from checkpoints, is not built).

Cotangents hold one value per element, per node or for the batch as their values do (a
cotangent the same for every element is spread over the batch, `add(zeros(x), c)`, before a
per-element share is made from it). An input in `wrt` no output depends on gets zeros. Every
new statement keeps the location of the statement it derives from.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Operation, Region, SSAValue

from irfuse.diagnostics import CompileError, UsageError, located
from irfuse.dialects.kas import (CallOp, ConstantOp, GatherOp, LoopOp, ProgramOp, ReduceKind, ReduceOp, ReturnOp,
                                 ScalarType, ScatterOp, YieldOp, is_uniform, nodal_values, ssa_hint)
from irfuse.library.derivatives import vjp_name
from irfuse.transforms.forward_mode import DerivativeBuilder, check_derivative_names, differentiable

MAX_UNROLLED = 4096  # statements a program's loops may become when unrolled for reverse mode


class _Reverse(DerivativeBuilder):
    """Copies a program's statements into a new block (`forward`, recording each on the tape),
    then adds their adjoints in reverse order (`backward`)."""

    def __init__(self, library, prefix: str, where: str):
        super().__init__(library, prefix)
        self.where = where
        self.uniform: set[SSAValue] = set()  # copies that hold one value for the batch
        self.nodal: set[SSAValue] = set()  # copies that hold one value per node
        # (old op, its copy's operands, its copy's results), in the order they run
        self.tape: list[tuple[Operation, list[SSAValue], list[SSAValue]]] = []
        self.adjoint: dict[SSAValue, SSAValue] = {}  # copy -> its cotangent so far
        # (uniform copy, whether per node) -> the per-element (per-node) sum of its shares so
        # far, reduced over the batch (the nodes) once, when its cotangent is read (`flush`)
        self.batch_shares: dict[tuple[SSAValue, bool], SSAValue] = {}
        self.unrolled = 0

    # -- building
    def call(self, block: Block, name: str, args: Sequence[SSAValue], like: Operation, hint: str | None = None,
             uniform: bool | None = None) -> SSAValue:
        op = self.lib.get(name)
        if op is None:
            raise CompileError(located(f"{self.where}: '{name}' is not an op of the library", like.location))
        new = self.emit(block, CallOp(name, args, op.result_type), like)
        new.res.name_hint = hint
        if uniform if uniform is not None else all(a in self.uniform for a in args):
            self.uniform.add(new.res)
        if any(a in self.nodal for a in args):
            self.nodal.add(new.res)
        return new.res

    def resolve(self, family: str, types) -> str:
        return self.lib.resolve(family, list(types)).name

    # -- the forward sweep: the program's statements, loops unrolled
    def forward(self, ops: Sequence[Operation], block: Block, value: dict[SSAValue, SSAValue]) -> None:
        for op in ops:
            if isinstance(op, LoopOp):
                self.unroll(op, block, value)
                continue
            if isinstance(op, (YieldOp, ReturnOp)):
                continue
            if not isinstance(op, (CallOp, ConstantOp, ReduceOp, GatherOp, ScatterOp)):
                raise CompileError(located(f"{self.where}: no derivative of {op.name}", op.location))
            new = op.clone(value_mapper={**value})
            for r, c in zip(op.results, new.results):
                c.name_hint = r.name_hint
            self.emit(block, new, op)
            operands = list(new.operands)
            for r, c in zip(op.results, new.results):
                value[r] = c
                if isinstance(op, (ConstantOp, ReduceOp)) or (operands and all(a in self.uniform for a in operands)):
                    self.uniform.add(c)
                if isinstance(op, ScatterOp) or (isinstance(op, CallOp) and any(a in self.nodal for a in operands)):
                    self.nodal.add(c)
            self.tape.append((op, operands, list(new.results)))

    def unroll(self, loop: LoopOp, block: Block, value: dict[SSAValue, SSAValue]) -> None:
        body = [op for op in loop.body.block.ops if not isinstance(op, YieldOp)]
        # (a nested loop counts its own statements when it is unrolled, once per iteration here)
        self.unrolled += loop.trip_count.data * sum(1 for op in body if not isinstance(op, LoopOp))
        if self.unrolled > MAX_UNROLLED:
            raise CompileError(located(
                f"{self.where}: reverse mode unrolls loops, and this one makes the program's loops more than "
                f"{MAX_UNROLLED} statements; storing a loop's carried values per iteration or recomputing them "
                "from checkpoints is not built", loop.location))
        term = loop.body.block.last_op
        current = [value[v] for v in loop.iter_args]
        inner = dict(value)
        for _ in range(loop.trip_count.data):
            inner.update(zip(loop.body.block.args, current))
            self.forward(body, block, inner)
            current = [inner[v] for v in term.values[:len(loop.iter_args)]]
        for r, v in zip(loop.res, term.values):
            value[r] = inner[v]

    # -- the adjoint sweep
    def accumulate(self, block: Block, v: SSAValue, share: SSAValue, like: Operation) -> None:
        key: object = v
        shares: dict = self.adjoint
        if v in self.uniform and share not in self.uniform:
            shares, key = self.batch_shares, (v, share in self.nodal)
        old = shares.get(key)
        if old is None:
            shares[key] = share
            return
        shares[key] = self.call(block, self.resolve("add", [v.type, v.type]), [old, share], like, self.hint(v),
                                uniform=shares is self.adjoint and v in self.uniform)
        if key != v and key[1]:
            self.nodal.add(shares[key])

    def flush(self, block: Block, v: SSAValue, like: Operation) -> None:
        """Adds the batch's (the nodes') sum of `v`'s per-element (per-node) shares, one
        reduction each, to its cotangent."""
        for nodal in (False, True):
            shares = self.batch_shares.pop((v, nodal), None)
            if shares is not None:
                total = self.emit(block, ReduceOp(ReduceKind.SUM, shares), like).res
                total.name_hint = self.hint(v)
                self.uniform.add(total)
                self.accumulate(block, v, total, like)

    def spread(self, block: Block, v: SSAValue, c: SSAValue, like: Operation) -> SSAValue:
        """Cotangent `c` of value `v` as one value per element (or node) where `v` holds one."""
        if c in self.uniform and v not in self.uniform:
            z = self.call(block, self.resolve("zeros", [v.type]), [v], like, uniform=False)
            return self.call(block, self.resolve("add", [v.type, v.type]), [z, c], like, uniform=False)
        return c

    def backward(self, block: Block, active: set[SSAValue]) -> None:
        for op, operands, results in reversed(self.tape):
            if results:
                self.flush(block, results[0], op)
            if not results or results[0] not in self.adjoint:
                continue
            res = results[0]
            ct = self.spread(block, res, self.adjoint[res], op)
            if isinstance(op, CallOp):
                self.call_adjoint(block, op, operands, res, ct, active)
            elif isinstance(op, ReduceOp):
                self.reduce_adjoint(block, op, operands[0], res, ct, active)
            elif isinstance(op, GatherOp):
                if operands[0] in active:
                    share = self.emit(block, ScatterOp(ct, operands[1]), op).res
                    self.nodal.add(share)
                    self.accumulate(block, operands[0], share, op)
            elif isinstance(op, ScatterOp):
                if operands[0] in active:
                    self.accumulate(block, operands[0], self.emit(block, GatherOp(ct, operands[1]), op).res, op)

    def call_adjoint(self, block: Block, op: CallOp, operands: list[SSAValue], res: SSAValue, ct: SSAValue,
                     active: set[SSAValue]) -> None:
        base = self.lib.get(op.op_name)
        for k, a in enumerate(operands):
            if a not in active or not differentiable(a):
                continue
            name = vjp_name(op.op_name, k)
            derived = self.lib.get(name)
            if derived is None:
                raise CompileError(located(f"{self.where}: '{op.op_name}' has no derivative for operand {k}",
                                           op.location))
            if all(getattr(t, "value", None) == 0 for t in derived.trees):
                continue  # a step: nothing flows back
            read = [x for x, n in zip(operands, base.operand_names) if n in derived.operand_names[:-1]]
            share = self.call(block, name, read + [ct], op, self.hint(a), uniform=res in self.uniform)
            self.accumulate(block, a, share, op)  # (a uniform operand's per-element shares: summed later)

    def reduce_adjoint(self, block: Block, op: ReduceOp, e: SSAValue, m: SSAValue, ct: SSAValue,
                       active: set[SSAValue]) -> None:
        if e not in active:
            return
        t = e.type
        if op.reduce_kind == ReduceKind.SUM:
            self.accumulate(block, e, self.spread(block, e, ct, op), op)
            return
        # Shared by the elements that attain the maximum (minimum): 1 where e equals it, over
        # their count.
        zeros = self.call(block, self.resolve("zeros", [t]), [e], op, uniform=False)
        one = self.emit(block, ConstantOp(1.0), op).res
        self.uniform.add(one)
        ones = self.call(block, self.resolve("add", [t, one.type]), [zeros, one], op, uniform=False)
        picked = self.call(block, self.resolve("ifeq", [t] * 4), [e, m, ones, zeros], op, uniform=False)
        count = self.emit(block, ReduceOp(ReduceKind.SUM, picked), op).res
        self.uniform.add(count)
        weighted = self.call(block, self.resolve("emul", [t, t]), [picked, ct], op, uniform=False)
        self.accumulate(block, e, self.call(block, self.resolve("ediv", [t, t]), [weighted, count], op,
                                            uniform=False), op)


def _active(program: ProgramOp, wrt: set[str]) -> set[SSAValue]:
    """The old program's values that depend on an input in `wrt` (loops' block arguments and
    results by a fixed point over their carried values)."""
    active = {a for name, a in zip(program.inputs, program.body.block.args) if name in wrt and differentiable(a)}

    def walk(ops) -> None:
        for op in ops:
            if isinstance(op, LoopOp):
                args, term = op.body.block.args, op.body.block.last_op
                while True:
                    before = len(active)
                    active.update(a for a, v in zip(args, op.iter_args) if v in active and differentiable(a))
                    walk(list(op.body.block.ops))
                    active.update(a for a, v in zip(args, term.values) if v in active and differentiable(a))
                    if len(active) == before:
                        break
                active.update(r for r, v in zip(op.res, term.values) if v in active and differentiable(r))
            elif not isinstance(op, (ConstantOp, YieldOp, ReturnOp)) and any(
                    v in active for v in op.operands if differentiable(v)):
                active.update(r for r in op.results if differentiable(r))
    walk(list(program.body.block.ops))
    return active


def reverse_derivative(program: ProgramOp, wrt: Sequence[str], library, of: str | None = None,
                       prefix: str | None = None, who: str = "kas-vjp") -> ProgramOp:
    """With `of` None: program `<name>_vjp`, taking the inputs and a cotangent `<prefix><y>`
    for each output y, returning the outputs and a cotangent `<prefix><x>` for each input x
    in `wrt` (prefix `bar_` by default). With `of` a uniform scalar output: program
    `<name>_grad`, taking the inputs, returning the outputs and the gradient of `of`,
    `<prefix><x>` (prefix `grad_` by default). UsageError for what does not fit."""
    where = f"{who} on @{program.sym_name.data}"
    inputs, outputs = program.inputs, program.outputs
    prefix = prefix if prefix is not None else ("bar_" if of is None else "grad_")
    args = program.body.block.args
    ret = program.return_op
    if of is not None:
        if of not in outputs:
            raise UsageError(f"{where}: '{of}' is not an output (its outputs: {', '.join(outputs)})")
        v = ret.values[outputs.index(of)]
        if not isinstance(v.type, ScalarType) or not is_uniform(v):
            raise UsageError(f"{where}: '{of}' is a {'uniform ' if is_uniform(v) else 'per-element '}{v.type}; "
                             "a gradient is of a uniform scalar (a sum over the batch); use vjp for others")
    # Each output but a mask takes a cotangent (a gradient's of output is seeded with 1).
    seeded = [] if of is not None else [(y, v) for y, v in zip(outputs, ret.values) if differentiable(v)]
    seeds = [prefix + y for y, _ in seeded]
    results = [prefix + x for x in wrt]
    check_derivative_names(program, wrt, prefix, where, "cotangent", seeds + results)
    nodal_old = nodal_values(program)
    block = Block(arg_types=[a.type for a in args] + [v.type for _, v in seeded])
    r = _Reverse(library, prefix, where)
    value: dict[SSAValue, SSAValue] = {}
    for name, a, new in zip(inputs, args, block.args):
        new.name_hint = a.name_hint
        value[a] = new
        if name in program.uniform:
            r.uniform.add(new)
        if a in nodal_old:
            r.nodal.add(new)
    r.forward(list(program.body.block.ops), block, value)
    active_old = _active(program, set(wrt))
    # The copies of active values (per iteration for an unrolled loop's).
    active = {c for op, _, res in r.tape for c, o in zip(res, op.results) if o in active_old}
    active |= {value[a] for a in args if a in active_old}
    for name, (_, v), seed_arg in zip(seeds, seeded, block.args[len(args):]):
        seed_arg.name_hint = ssa_hint(name)
        if is_uniform(v):
            r.uniform.add(seed_arg)
        if v in nodal_old:
            r.nodal.add(seed_arg)
        if value[v] in active:
            r.accumulate(block, value[v], seed_arg, ret)
    if of is not None and value[ret.values[outputs.index(of)]] in active:
        one = r.emit(block, ConstantOp(1.0), ret).res
        r.uniform.add(one)
        r.adjoint[value[ret.values[outputs.index(of)]]] = one
    r.backward(block, active)
    returned = [value[v] for v in ret.values]
    for x in wrt:
        a = value[args[inputs.index(x)]]
        r.flush(block, a, ret)
        c = r.adjoint.get(a)
        if c is None:
            c = r.call(block, r.resolve("zeros", [a.type]), [a], ret, uniform=a in r.uniform)
        returned.append(r.spread(block, a, c, ret))
    r.emit(block, ReturnOp(returned), ret)
    uniform = program.uniform + [s for s, (_, v) in zip(seeds, seeded) if is_uniform(v)]
    nodal = program.nodal + [prefix + y for y, _ in seeded if y in program.nodal]
    nodal += [prefix + x for x in wrt if x in program.nodal]
    suffix = "_vjp" if of is None else "_grad"
    new = ProgramOp(f"{program.sym_name.data}{suffix}", list(inputs) + seeds, block.arg_types,
                    list(outputs) + results, Region(block), uniform=uniform, nodal=nodal)
    new.location = program.location
    return new
