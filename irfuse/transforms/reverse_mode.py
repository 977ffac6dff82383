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
- a loop, by `loops`:
  - `unroll`: unrolled first (its carried values are then plain values, each iteration's
    kept for the sweep); past `MAX_UNROLLED` statements unrolled in all, refused;
  - `tape`: run as a loop that also pushes each iteration's carried state onto a history (a
    value of the loop's own, `push`: an array of trip-count rows per carried value, the
    newest first), then its adjoint as a loop of as many iterations that pops the states
    back (`item_0`, `pop`), computes the iteration again from its state and runs its
    adjoint: the carried values' cotangents are carried, the shares of values from outside
    the loop summed in carried values (per element, a uniform one's summed over the batch
    once after the loop). A long history costs: each push moves the whole history down a
    row, each pop moves it up. So a taped loop of more than three iterations may be split
    into a loop of about sqrt(n) segments whose body is a loop over one segment (and a loop
    of the n mod segment iterations before them), each taped in turn, so the outer history
    holds the segments' starting states (checkpoints) and each segment's states are computed
    again from its checkpoint when its adjoint runs: one more pass of the loop's arithmetic
    for histories of a few sqrt(n) rows. The pieces may be split again, down to segments of
    two or three iterations. How many times (the *levels*: 0, histories whole; a loop of
    more than `MAX_HISTORY_ROWS` iterations is split whatever the levels) is the planner's
    decision (`LoopJudge.taped_price`): the derivative is built at each number of
    levels that splits something more (up to `MAX_TAPED_LOOPS` loops in all), and the one
    whose planned kernels fit a thread's registers in the least predicted time is taken
    (ties: fewer levels). Loops whose
    carried values cannot be kept in a history (masks, values of four axes) or that return a
    uniform value computed inside are unrolled;
  - `auto` (the default): the planner decides (`LoopJudge.unrolled_fits`, given by the
    caller: `planner.loop_forms`). The program is first derived with its loops unrolled;
    where the planner's kernels of that program keep their values in a thread's registers,
    it is the derivative (straight code: no iteration computed twice), else its loops are
    taped as above (all that can be: the loops inside a taped loop are taped too).

Cotangents hold one value per element, per node or for the batch as their values do (a
cotangent the same for every element is spread over the batch, `add(zeros(x), c)`, before a
per-element share is made from it). An input in `wrt` no output depends on gets zeros. Every
new statement keeps the location of the statement it derives from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, UsageError, located
from irfuse.dialects.kas import (CallOp, ConstantOp, GatherOp, LoopOp, ProgramOp, ReduceKind, ReduceOp,
                                 ReturnOp, ScalarType, ScatterOp, TableOp, YieldOp, is_uniform, nodal_values, ssa_hint)
from irfuse.library.derivatives import vjp_name
from irfuse.transforms.forward_mode import DerivativeBuilder, check_derivative_names, differentiable

MAX_UNROLLED = 4096  # statements a program's loops may become when unrolled for reverse mode
MAX_LEVELS = 8  # levels tried at most (a loop of at most MAX_HISTORY_ROWS iterations reaches segments of 2-3 in 3)
# A loop of more iterations is split whatever the levels: each push and pop moves every row of
# its history (a 40-row history measured 7.2x slower than segments), and the history ops of
# thousands of rows would be definitions of thousands of terms.
MAX_HISTORY_ROWS = 64
# A deeper split whose derivative has more loops than this is not built: each level multiplies
# the loops (3,000 iterations: 7, 29, then 231 loops), and planning the program (to price it,
# then to compile it) grows with them (42 s to price the 231).
MAX_TAPED_LOOPS = 64
LOOP_MODES = ("auto", "unroll", "tape")
_NOT_TAPEABLE = ("it cannot run with a history either (it carries a mask or a value of four axes, returns a "
                 "uniform value computed inside, or holds a reduction, gather or scatter)")


@record(frozen=True)
class LoopJudge:
    """The planner's answers reverse mode needs (this layer cannot plan: `planner.loop_forms`)."""

    unrolled_fits: Callable[[ProgramOp], bool]  # whether a straight-code derivative stays in registers
    taped_price: Callable[[ProgramOp], tuple[bool, float]]  # (kernels fit registers, predicted seconds)


@record
class _TapedLoop:
    """A loop run with its history (`_Reverse.tape_loop`): what its adjoint needs."""

    loop: LoopOp  # the old loop
    inits: list[SSAValue]  # the copies of its iter_args
    results: list[SSAValue]  # the copies of its results (aligned with loop.res)
    histories: list[SSAValue]  # one per carried value: its states, the last iteration's first
    value: dict[SSAValue, SSAValue]  # old -> copy for the values defined before the loop


class _Reverse(DerivativeBuilder):
    """Copies a program's statements into a new block (`forward`, recording each on the tape),
    then adds their adjoints in reverse order (`backward`)."""

    def __init__(self, library, prefix: str, where: str, loops: str = "auto", per_element: bool = False,
                 active_old: set[SSAValue] | None = None, levels: int = 0,
                 level: dict[Operation, int] | None = None):
        super().__init__(library, prefix)
        self.where = where
        self.loops = loops
        self.levels = levels  # times a taped loop may be split into checkpointed segments
        self.level: dict[Operation, int] = level if level is not None else {}  # split pieces -> their level
        self.held_back = False  # whether a loop was kept whole only because of `levels`
        # In a taped loop's adjoint (no reduction may run there): every cotangent is one
        # element's share, a uniform value's too; the loop's caller sums them over the batch.
        self.per_element = per_element
        self.active_old: set[SSAValue] = active_old if active_old is not None else set()
        self.taped: dict[Operation, _TapedLoop] = {}
        self.split: list[Operation] = []  # loops made by splitting old ones (dropped at the end)
        self.sweeping = False  # in `backward`
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
        if self.per_element and self.sweeping:
            uniform = False
        if uniform if uniform is not None else all(a in self.uniform for a in args):
            self.uniform.add(new.res)
        if any(a in self.nodal for a in args):
            self.nodal.add(new.res)
        return new.res

    def resolve(self, family: str, types, params: Sequence[str] = ()) -> str:
        return self.lib.resolve(family, list(types), tuple(params)).name

    # -- the forward sweep: the program's statements, loops unrolled
    def forward(self, ops: Sequence[Operation], block: Block, value: dict[SSAValue, SSAValue]) -> None:
        for op in ops:
            if isinstance(op, LoopOp):
                if self.tapes(op):
                    self.tape_loop(op, block, value)
                else:
                    self.unroll(op, block, value)
                continue
            if isinstance(op, (YieldOp, ReturnOp)):
                continue
            if not isinstance(op, (CallOp, ConstantOp, TableOp, ReduceOp, GatherOp, ScatterOp)):
                raise CompileError(located(f"{self.where}: no derivative of {op.name}", op.location))
            new = op.clone(value_mapper={**value})
            for r, c in zip(op.results, new.results):
                c.name_hint = r.name_hint
            self.emit(block, new, op)
            operands = list(new.operands)
            for r, c in zip(op.results, new.results):
                value[r] = c
                if isinstance(op, (ConstantOp, TableOp, ReduceOp)) or (
                        operands and all(a in self.uniform for a in operands)):
                    self.uniform.add(c)
                if isinstance(op, ScatterOp) or (isinstance(op, CallOp) and any(a in self.nodal for a in operands)):
                    self.nodal.add(c)
            self.tape.append((op, operands, list(new.results)))

    def tapes(self, loop: LoopOp) -> bool:
        """Whether `loop` runs with its history (else it is unrolled): see the module's docstring."""
        return self.loops == "tape" and _tapeable(loop)

    def tape_loop(self, loop: LoopOp, block: Block, value: dict[SSAValue, SSAValue]) -> None:
        """The loop's copy, each iteration first pushing its carried state onto the carried
        values' histories; a loop of more than three iterations below `levels` (or of more than
        `MAX_HISTORY_ROWS`), split into segments first."""
        n = loop.trip_count.data
        if 3 < n <= MAX_HISTORY_ROWS and self.level.get(loop, 0) >= self.levels:
            self.held_back = True
        elif n > 3:
            pieces = self.segments(loop)
            for piece in pieces:
                self.tape_loop(piece, block, value)
            for r, p in zip(loop.res, pieces[-1].results):
                value[r] = value[p]
            return
        old, term = loop.body.block, loop.body.block.last_op
        n_iter = len(loop.iter_args)
        inits = [value[v] for v in loop.iter_args]
        histories = [self.call(block, self.resolve("repeat", [v.type], (str(n),)), [v], loop, uniform=False)
                     for v in inits]
        body = Block(arg_types=[a.type for a in old.args] + [h.type for h in histories])
        inner = dict(value)
        for a, b in zip(old.args, body.args):
            b.name_hint = a.name_hint
            inner[a] = b
        pushed = [self.call(body, self.resolve("push", [h.type, a.type]), [h, a], loop, uniform=False)
                  for h, a in zip(body.args[n_iter:], body.args[:n_iter])]
        for op in loop.body_ops:
            new = op.clone(value_mapper={**inner})
            for r, c in zip(op.results, new.results):
                c.name_hint = r.name_hint
                inner[r] = c
            self.emit(body, new, op)
        self.emit(body, YieldOp([inner[v] for v in term.values[:n_iter]] + pushed
                                + [inner[v] for v in term.values[n_iter:]]), term)
        types = [r.type for r in loop.res[:n_iter]] + [h.type for h in histories] + [r.type for r in loop.res[n_iter:]]
        new = self.emit(block, LoopOp(n, inits + histories, types, Region(body)), loop)
        res = list(new.res)
        results = res[:n_iter] + res[2 * n_iter:]
        for r, c in zip(loop.res, results):
            c.name_hint = r.name_hint
            value[r] = c
        self.taped[loop] = _TapedLoop(loop, inits, results, res[n_iter:2 * n_iter], dict(value))
        self.tape.append((loop, inits, results))

    def segments(self, loop: LoopOp) -> list[LoopOp]:
        """`loop` as a loop of n mod s iterations (if any), then a loop of n // s segments
        whose body is a loop of s iterations (s about sqrt(n)): the same values, new ops
        (outside any block; their values active where the loop's are; each a level below the
        loop's unless the split was forced)."""
        n, n_iter = loop.trip_count.data, len(loop.iter_args)
        # (a split forced by MAX_HISTORY_ROWS is not one of the levels the planner prices)
        level = self.level.get(loop, 0) + (n <= MAX_HISTORY_ROWS)
        seg = max(2, round(math.sqrt(n)))
        count, rest = divmod(n, seg)
        pieces: list[LoopOp] = []
        inits = list(loop.iter_args)
        if rest:
            pieces.append(self.copy_loop(loop, rest, inits))
            inits = list(pieces[-1].res[:n_iter])
        outer = Block(arg_types=[v.type for v in loop.iter_args])
        for a, b in zip(loop.body.block.args, outer.args):
            b.name_hint = a.name_hint
            if a in self.active_old:
                self.active_old.add(b)
        inner = self.copy_loop(loop, seg, list(outer.args))
        outer.add_op(inner)
        outer.add_op(YieldOp(list(inner.res)))
        outer.last_op.location = loop.body.block.last_op.location
        nest = LoopOp(count, inits, [r.type for r in loop.res], Region(outer))
        nest.location = loop.location
        for r, c in zip(loop.res, nest.res):
            c.name_hint = r.name_hint
            if r in self.active_old:
                self.active_old.add(c)
        pieces.append(nest)
        self.split += pieces
        for piece in (*pieces, inner):
            self.level[piece] = level
        return pieces

    def copy_loop(self, loop: LoopOp, trips: int, inits: list[SSAValue]) -> LoopOp:
        """A copy of `loop` running `trips` iterations from `inits`, its values active where
        the loop's are."""
        mapper: dict[SSAValue, SSAValue] = {}
        new = loop.clone(value_mapper=mapper)
        new.operands = inits
        new.properties["trip_count"] = IntAttr(trips)
        for o, c in list(mapper.items()) + list(zip(loop.res, new.res)):
            if o in self.active_old:
                self.active_old.add(c)
        for o, c in zip(loop.walk(), new.walk()):  # (a segment's loop inside: a copy at its level)
            if o is not loop and o in self.level:
                self.level[c] = self.level[o]
        return new

    def unroll(self, loop: LoopOp, block: Block, value: dict[SSAValue, SSAValue]) -> None:
        body = [op for op in loop.body.block.ops if not isinstance(op, YieldOp)]
        # (a nested loop counts its own statements when it is unrolled, once per iteration here)
        self.unrolled += loop.trip_count.data * sum(1 for op in body if not isinstance(op, LoopOp))
        if self.unrolled > MAX_UNROLLED:
            raise CompileError(located(
                f"{self.where}: reverse mode unrolls loops, and this one makes the program's loops more than "
                f"{MAX_UNROLLED} statements; " + ("loops=auto or loops=tape runs it with a history of its carried "
                                                  "values" if _tapeable(loop) else _NOT_TAPEABLE), loop.location))
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
        if v in self.uniform and share not in self.uniform and not self.per_element:
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
        self.sweeping = True
        for op, operands, results in reversed(self.tape):
            if isinstance(op, LoopOp):
                self.loop_adjoint(block, self.taped[op], active)
                continue
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

    def zeros_per_element(self, block: Block, v: SSAValue, anchor: SSAValue, like: Operation) -> SSAValue:
        """Zeros of `v`'s type, one per element (`anchor`: a value that holds one per element)."""
        if v not in self.uniform:
            return self.call(block, self.resolve("zeros", [v.type]), [v], like, uniform=False)
        zero = self.call(block, self.resolve("zeros", [anchor.type]), [anchor], like, uniform=False)
        while zero.type.shape:
            zero = self.call(block, self.resolve("item", [zero.type], ("0",)), [zero], like, uniform=False)
        if v.type == zero.type:
            return zero  # (a uniform scalar's: no uniform statement, which would run in a kernel of its own)
        spread = self.call(block, self.resolve("zeros", [v.type]), [v], like, uniform=True)
        return self.call(block, self.resolve("add", [v.type, zero.type]), [spread, zero], like, uniform=False)

    def loop_adjoint(self, block: Block, t: _TapedLoop, active: set[SSAValue]) -> None:
        """The adjoint of a taped loop: a loop of as many iterations, each popping the state of
        the forward loop's iteration in reverse order, computing that iteration again and
        running its adjoint (a builder of its own, every cotangent per element); the carried
        values' cotangents carried, the shares of outside values summed in carried values."""
        loop, n_iter = t.loop, len(t.loop.iter_args)
        old, term = loop.body.block, loop.body.block.last_op
        # (a value only read after the loop takes part where it has a cotangent)
        extras = [k for k in range(n_iter, len(loop.res)) if t.results[k] in self.adjoint]
        seeded = list(range(n_iter)) + extras
        if not any(t.results[k] in self.adjoint for k in seeded):
            return
        outer = [x for x in _outer_reads(loop) if x in self.active_old and differentiable(x) and t.value[x] in active]
        anchor = t.results[0]
        seeds = []
        for k in seeded:
            c = self.adjoint.get(t.results[k])
            seeds.append(self.spread(block, t.results[k], c, loop) if c is not None else
                         self.call(block, self.resolve("zeros", [t.results[k].type]), [t.results[k]], loop,
                                   uniform=False))
        sums = [self.zeros_per_element(block, t.value[x], anchor, loop) for x in outer]
        body = Block(arg_types=[c.type for c in seeds] + [h.type for h in t.histories] + [a.type for a in sums])
        cts, hists, accs = (body.args[:len(seeds)], body.args[len(seeds):len(seeds) + n_iter],
                            body.args[len(seeds) + n_iter:])
        for k, a in zip(seeded, cts):
            a.name_hint = self.hint(loop.res[k])
        for x, a in zip(outer, accs):
            a.name_hint = self.hint(x)
        states = [self.call(body, self.resolve("item", [h.type], ("0",)), [h], loop, a.name_hint,
                            uniform=False) for h, a in zip(hists, old.args)]
        popped = [self.call(body, self.resolve("pop", [h.type]), [h], loop, uniform=False) for h in hists]
        # (loops inside a taped loop are taped too where they can be: unrolled there, each
        # segment of a split loop would be straight code of hundreds of statements in a loop)
        sub = _Reverse(self.lib, self.prefix, self.where, self.loops, per_element=True, active_old=self.active_old,
                       levels=self.levels, level=self.level)
        sub.uniform, sub.nodal = set(self.uniform), set(self.nodal)
        inner = dict(t.value)
        inner.update(zip(old.args, states))
        sub.forward(loop.body_ops, body, inner)
        sub_active = {c for op, _, res in sub.tape for c, o in zip(res, op.results) if o in self.active_old}
        sub_active |= {s for a, s in zip(old.args, states) if a in self.active_old}
        sub_active |= {t.value[x] for x in outer}
        sub.sweeping = True
        for k, ct in zip(seeded, cts):
            y = inner[term.values[k]]
            if y in sub_active:
                sub.accumulate(body, y, ct, term)
        sub.backward(body, sub_active)
        self.split += sub.split
        self.held_back |= sub.held_back
        yields = []
        for s, ct in zip(states, cts[:n_iter]):
            c = sub.adjoint.get(s)
            yields.append(c if c is not None else self.call(body, self.resolve("zeros", [ct.type]), [ct], term,
                                                            uniform=False))
        # (a value read after the loop is the last iteration's: its cotangent enters once)
        yields += [self.call(body, self.resolve("zeros", [e.type]), [e], term, uniform=False) for e in cts[n_iter:]]
        yields += popped
        for x, acc in zip(outer, accs):
            share = sub.adjoint.get(t.value[x])
            yields.append(acc if share is None else
                          self.call(body, self.resolve("add", [acc.type, acc.type]), [acc, share], term,
                                    self.hint(x), uniform=False))
        self.emit(body, YieldOp(yields), term)
        new = self.emit(block, LoopOp(loop.trip_count.data, seeds + t.histories + sums, [y.type for y in yields],
                                      Region(body)), loop)
        res = list(new.res)
        for k, (init, ct) in enumerate(zip(t.inits, res[:n_iter])):
            ct.name_hint = self.hint(old.args[k])
            if init in active:
                self.accumulate(block, init, ct, loop)
        for x, total in zip(outer, res[len(seeds) + n_iter:]):
            total.name_hint = self.hint(x)
            self.accumulate(block, t.value[x], total, loop)

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


def _tapeable(loop: LoopOp) -> bool:
    """Whether a loop can run with a history: carried values of at most three axes, none a
    mask; no uniform value computed inside and read after it; no reduction, gather or scatter
    inside (their adjoints are not per-element statements)."""
    term = loop.body.block.last_op
    n_iter = len(loop.iter_args)
    if not n_iter or any(not differentiable(v) or len(v.type.shape) > 3 for v in loop.iter_args):
        return False
    if any(is_uniform(v) for v in term.values[n_iter:]):
        return False
    return not any(isinstance(op, (ReduceOp, GatherOp, ScatterOp)) for op in loop.walk())


def _outer_reads(loop: LoopOp) -> list[SSAValue]:
    """The values a loop's body reads (nested loops' included) that are defined outside it,
    in the order they are first read."""
    inside: set[SSAValue] = set()
    for op in loop.walk():
        inside.update(op.results)
        for region in op.regions:
            for b in region.blocks:
                inside.update(b.args)
    out: dict[SSAValue, None] = {}
    for op in loop.walk():
        if op is loop:
            continue
        for v in op.operands:
            if v not in inside:
                out.setdefault(v)
    return list(out)


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
            elif not isinstance(op, (ConstantOp, TableOp, YieldOp, ReturnOp)) and any(
                    v in active for v in op.operands if differentiable(v)):
                active.update(r for r in op.results if differentiable(r))
    walk(list(program.body.block.ops))
    return active


def reverse_derivative(program: ProgramOp, wrt: Sequence[str], library, of: str | None = None,
                       prefix: str | None = None, who: str = "kas-vjp", loops: str = "auto",
                       judge: LoopJudge | None = None) -> ProgramOp:
    """With `of` None: program `<name>_vjp`, taking the inputs and a cotangent `<prefix><y>`
    for each output y, returning the outputs and a cotangent `<prefix><x>` for each input x
    in `wrt` (prefix `bar_` by default). With `of` a uniform scalar output: program
    `<name>_grad`, taking the inputs, returning the outputs and the gradient of `of`,
    `<prefix><x>` (prefix `grad_` by default). `loops`: how loops are differentiated (see the
    module's docstring); `judge` gives the planner's answers that `auto` and `tape` need for
    a program with a loop that can be taped (`planner.loop_forms.LOOP_JUDGE`; this layer
    cannot plan). UsageError for what does not fit."""
    where = f"{who} on @{program.sym_name.data}"
    if not isinstance(loops, str) or loops not in LOOP_MODES:
        raise UsageError(f"{where}: loops={loops!r} is not one of {', '.join(LOOP_MODES)}")
    if loops == "unroll" or not any(isinstance(op, LoopOp) and _tapeable(op) for op in program.walk()):
        return _derive(program, wrt, library, of, prefix, where, "unroll")[0]  # (nothing to decide)
    if judge is None:
        raise ValueError(f"reverse_derivative: loops='{loops}' needs the planner's answers (judge)")
    if loops == "auto":
        try:
            unrolled = _derive(program, wrt, library, of, prefix, where, "unroll")[0]
        except CompileError:
            unrolled = None  # (past MAX_UNROLLED statements; any other error comes again below)
        if unrolled is not None and judge.unrolled_fits(unrolled):
            return unrolled
    best: tuple[tuple[bool, float], ProgramOp] | None = None
    for levels in range(MAX_LEVELS + 1):
        taped, held_back = _derive(program, wrt, library, of, prefix, where, "tape", levels)
        if best is not None and sum(isinstance(op, LoopOp) for op in taped.walk()) > MAX_TAPED_LOOPS:
            break
        fits, seconds = judge.taped_price(taped)
        key = (not fits, seconds)
        if best is None or key < best[0]:
            best = (key, taped)
        if not held_back:
            break
    return best[1]


def _derive(program: ProgramOp, wrt: Sequence[str], library, of: str | None, prefix: str | None, where: str,
            loops: str, levels: int = 0) -> tuple[ProgramOp, bool]:
    """`reverse_derivative` with loops unrolled or taped (split `levels` times at most), and
    whether a loop was kept whole only because of `levels`."""
    inputs, outputs = program.inputs, program.outputs
    prefix = prefix if prefix is not None else ("bar_" if of is None else "grad_")
    args = program.body.block.args
    ret = program.return_op
    if of is not None:
        if of not in outputs:
            raise UsageError(f"{where}: '{of}' is not an output (its outputs: {', '.join(outputs)})")
        v = ret.values[outputs.index(of)]
        if not isinstance(v.type, ScalarType) or not is_uniform(v):
            # (a per-element scalar's gradient is that of its sum, element by element: say how)
            summed = (f"; of a per-element energy, take the sum's, sum({of}): its gradient and Hessian are each "
                      "element's" if isinstance(v.type, ScalarType) else "")
            raise UsageError(f"{where}: '{of}' is a {'uniform ' if is_uniform(v) else 'per-element '}{v.type}; "
                             f"a gradient is of a uniform scalar (a sum over the batch){summed}; use vjp for others")
    # Each output but a mask takes a cotangent (a gradient's of output is seeded with 1).
    seeded = [] if of is not None else [(y, v) for y, v in zip(outputs, ret.values) if differentiable(v)]
    seeds = [prefix + y for y, _ in seeded]
    results = [prefix + x for x in wrt]
    check_derivative_names(program, wrt, prefix, where, "cotangent", seeds + results)
    nodal_old = nodal_values(program)
    block = Block(arg_types=[a.type for a in args] + [v.type for _, v in seeded])
    r = _Reverse(library, prefix, where, loops, active_old=_active(program, set(wrt)), levels=levels)
    value: dict[SSAValue, SSAValue] = {}
    for name, a, new in zip(inputs, args, block.args):
        new.name_hint = a.name_hint
        value[a] = new
        if name in program.uniform:
            r.uniform.add(new)
        if a in nodal_old:
            r.nodal.add(new)
    r.forward(list(program.body.block.ops), block, value)
    active_old = r.active_old
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
    for piece in r.split:  # (the split loops read the program's values: they must not keep uses of them)
        piece.drop_all_references()
    uniform = program.uniform + [s for s, (_, v) in zip(seeds, seeded) if is_uniform(v)]
    nodal = program.nodal + [prefix + y for y, _ in seeded if y in program.nodal]
    nodal += [prefix + x for x in wrt if x in program.nodal]
    suffix = "_vjp" if of is None else "_grad"
    new = ProgramOp(f"{program.sym_name.data}{suffix}", list(inputs) + seeds, block.arg_types,
                    list(outputs) + results, Region(block), uniform=uniform, nodal=nodal)
    new.location = program.location
    return new, r.held_back
