"""Per-element tangents: a program's Jacobian of one output by one input, entry by entry.

`jacobian_program(program, of, wrt)` builds program `<name>_jacobian`: the inputs; the
outputs, then for each input x in `wrt` the output `<prefix><of>_<prefix><x>`, the derivative
of output y = `of` by x at each element, shaped `(*y.shape, *x.shape)` (d sig / d eps of two
3x3 matrices is a 3x3x3x3 tensor: entry [i, j, k, l] is d sig[i, j] / d eps[k, l]).

It is forward mode (`forward_mode`) along every direction of x at once: the program's
statements are copied once, and each is followed by its tangent along each unit direction
e_k of x (a value of x's type with a 1 at entry k, stacked from literals: `_unit`); the
tangents of y along the directions are stacked (`stack`) into an array over x's entries and
its axes moved after y's (`contract`, a permutation). The directions' words are known, and
each tangent is made by its op's derivative with the known words of the tangents it reads
put in (`_Directions.call_tangent`, `library.known_words`: a structural 0 folds its
products away), its own known words then followed in turn. A branch (`if`, a
`select`) takes the derivative of the side its condition picks, as the forward derivative
does. For per-element values only: a program over a mesh (gathers, scatters), one with a
loop, an output that reads a reduction over the batch of a value that changes with x (other
elements' x change it too), or a Jacobian of more than 4 axes is refused by name; a
reduction the output does not read (the energy beside its gradient) is computed as it is.

`diagonal_program(program, of, wrt)` is the same directions' diagonal alone, for y and x of
one shape: each direction's tangent cut (`item`) to its own entry, the entries stacked in x's
shape (what only the other entries read is dead): a Jacobi preconditioner's per element.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.ir import Block, Operation, Region, SSAValue

from irfuse.diagnostics import CompileError, UsageError, located
from irfuse.dialects.kas import (MAX_AXES, CallOp, ConstantOp, GatherOp, LoopOp, ProgramOp, ReduceOp, ReturnOp,
                                 ScatterOp, is_uniform, ssa_hint)
from irfuse.library.derivatives import jvp_name
from irfuse.library.families import contract_params
from irfuse.library.indexexpr import Const, Leaf, operands_read
from irfuse.library.known_words import KNOWN_VALUES, known_name, put_in
from irfuse.transforms.forward_mode import _Builder, check_derivative_names, differentiable

PER_ELEMENT_ONLY = (GatherOp, ScatterOp, LoopOp)
LETTERS_OF_Y, LETTERS_OF_X = "ijkl", "mnop"


class _Directions(_Builder):
    """A program's statements copied once, each followed by its tangents along several
    directions (`tangents`: one map of values to tangents a direction), or, `by_direction`,
    all of them first and then one direction's tangents of them after another."""

    def __init__(self, library, prefix: str, count: int, by_direction: bool = False):
        super().__init__(library, prefix)
        self.tangents: list[dict[SSAValue, SSAValue]] = [{} for _ in range(count)]
        self.uniform_args: set[SSAValue] = set()  # (the new block's arguments that are uniform inputs)
        # Values that change with other elements' inputs (a reduction over the batch of a
        # value with a tangent, and what is computed from one): the reduction, by value.
        self.batch_wide: dict[SSAValue, Operation] = {}
        # `by_direction`: the statements copied first, then each direction's tangents of all of
        # them (`tangents_by_direction`), so that one direction's values are live at a time, not
        # every direction's at each statement; `varies`: the values that change with the inputs
        # followed (their tangents not made yet), `later`: the calls whose tangents are to come.
        self.by_direction = by_direction
        self.varies: set[SSAValue] = set()
        self.later: list[tuple[CallOp, list[SSAValue]]] = []
        # The tangents' words known to be 0 or 1 (value -> {word: value}): the directions' own
        # and what the ops reading them make of them (`call_tangent`); `literals`: the literal
        # values made for tangents that are all known (`_literal`: (shape, words) -> value).
        self.known: dict[SSAValue, dict[int, float]] = {}
        self.literals: dict = {}

    def reduce_op(self, op: ReduceOp, block: Block) -> None:
        new = self.emit(block, ReduceOp(op.reduce_kind, self.value[op.operand]), op)
        new.res.name_hint = op.res.name_hint
        self.value[op.res] = new.res
        if op.operand in self.batch_wide or op.operand in self.varies or any(op.operand in t for t in self.tangents):
            self.batch_wide[op.res] = self.batch_wide.get(op.operand, op)

    def statements(self, ops: Sequence[Operation], block: Block) -> None:
        for op in ops:
            if isinstance(op, PER_ELEMENT_ONLY):
                what = {GatherOp: "a gather", ScatterOp: "a scatter", LoopOp: "a loop"}[type(op)]
                raise CompileError(located(f"kas-jacobian: a per-element Jacobian does not go through {what}",
                                           op.location))
        super().statements(ops, block)

    def call_op(self, op: CallOp, block: Block) -> None:
        args = [self.value[a] for a in op.args]
        new = self.emit(block, CallOp(op.op_name, args, op.res.type), op)
        new.res.name_hint = op.res.name_hint
        self.value[op.res] = new.res
        wide = next((self.batch_wide[a] for a in op.args if a in self.batch_wide), None)
        if wide is not None:
            self.batch_wide[op.res] = wide
            return
        if self.by_direction:
            if any(a in self.varies for a in op.args):
                self.varies.add(op.res)
                self.later.append((op, args))
            return
        for tangent in self.tangents:
            self.tangent = tangent
            self.call_tangent(op, args, block)

    def call_tangent(self, op: CallOp, args: list[SSAValue], block: Block) -> None:
        """The tangent of call `op` (its copy's operands `args`) as forward mode makes it
        (`forward_mode._Builder.call_tangent`), where a tangent it reads has words known to be
        0 or 1 by the op with them put in (`library.known_words`): a product with a known 0
        is 0, a sum with it the other term, an operand no longer read is not passed. A tangent
        whose words all fold to literals is a literal value (all 0: none, as a step's), its
        0s and 1s known, so the ops reading it read none of those."""
        mask = [a in self.tangent for a in op.args]
        tangents = [self.tangent[a] for a, m in zip(op.args, mask) if m]
        if not any(t in self.known for t in tangents) or not differentiable(op.res):
            return super().call_tangent(op, args, block)
        name = jvp_name(op.op_name, mask)
        derived = self.lib.get(name)
        if derived is None:
            raise CompileError(located(f"kas-jvp: '{op.op_name}' has no derivative along operands "
                                       f"{[k for k, m in enumerate(mask) if m]}", op.location))
        base = self.lib.get(op.op_name)
        operands = [a for a, n in zip(args, base.operand_names) if n in derived.operand_names] + tangents
        known = [self.known.get(v, {}) for v in operands]
        entries = put_in(derived.trees, known)
        words = {w: t.value for w, t in enumerate(entries) if isinstance(t, Const) and t.value in KNOWN_VALUES}
        if len(words) == len(entries) and not any(words.values()):
            return  # (its change is 0 along this direction)
        same = _same_value(entries, operands, known, op.res.type)
        if same is not None:
            value = same  # (the op moves that operand's words to where they were: a tangent's sum with a 0)
        elif all(isinstance(t, Const) or (isinstance(t, Leaf) and not _shape(operands[t.operand])) for t in entries):
            # (literals and scalar operands moved: stacked from them, as the directions are, so
            # that no value of the result's size is held for them)
            value = _literal(self, block, _shape(op.res),
                             tuple(t.value if isinstance(t, Const) else operands[t.operand] for t in entries), op)
        else:
            folded = self.lib.get(known_name(name, known))
            if folded is None:
                raise CompileError(located(f"kas-jvp: '{name}' with its known words put in is no op", op.location))
            read = sorted(operands_read(entries))
            value = self.call(block, folded.name, [operands[k] for k in read], op, self.hint(op.res))
        self.tangent[op.res] = value
        if words:
            self.known[value] = words

    def tangents_by_direction(self, block: Block, each) -> None:
        """Each direction's tangents of the calls copied (`by_direction`), one direction after
        another, `each(k)` called after direction k's (what is taken of them goes there)."""
        for k, tangent in enumerate(self.tangents):
            self.tangent = tangent
            for op, args in self.later:
                self.call_tangent(op, args, block)
            each(k)

    def resolved(self, block: Block, family: str, args: Sequence[SSAValue], like: Operation,
                 params: Sequence[str] = (), hint: str | None = None) -> SSAValue:
        op = self.lib.resolve(family, [a.type for a in args], params)
        return self.call(block, op.name, args, like, hint)


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(getattr(v.type, "shape", ()))


def _unit(b: _Directions, block: Block, shape: tuple[int, ...], entry: tuple[int, ...], like: Operation) -> SSAValue:
    """A value shaped `shape` with 1 at `entry` and 0 elsewhere (`_literal`), its words known
    to the builder (`_Directions.known`): the ops reading it as a direction's tangent read
    none of them (a unit direction put into `zeros` of x was per element, held in shared
    memory and loaded by each direction's first steps)."""
    size = 1
    for n in shape:
        size *= n
    at = 0
    for n, i in zip(shape, entry):
        at = at * n + i
    words = tuple(1.0 if w == at else 0.0 for w in range(size))
    value = _literal(b, block, shape, words, like)
    b.known[value] = dict(enumerate(words))
    return value


def _same_value(entries: list, operands: list[SSAValue], known: list[dict], result_type) -> SSAValue | None:
    """The operand that the op's folded `entries` are, word for word, where there is one: an
    operand of the result's type whose every word not known is the entry at its place, read
    from it, and whose known words are the entries' literals there (the tangent of `add`
    along a direction that only one of its operands changes along is that operand's)."""
    for k, v in enumerate(operands):
        if v.type != result_type:
            continue
        words = known[k]
        if all((isinstance(t, Const) and words.get(w) == t.value) if w in words else
               (isinstance(t, Leaf) and t.operand == k and t.offset == w) for w, t in enumerate(entries)):
            return v
    return None


def _literal(b: _Directions, block: Block, shape: tuple[int, ...], words: tuple, like: Operation) -> SSAValue:
    """A value shaped `shape` of `words` (row-major: literals, or scalar values), stacked from
    them: where all are literals uniform, so a kernel makes it from its constants and the C
    compiler folds it into every step reading it. Made once a builder (`_Directions.literals`:
    (shape, words) -> value)."""
    key = (shape, words)
    if key not in b.literals:
        if not shape:
            value = words[0] if isinstance(words[0], SSAValue) else b.emit(block, ConstantOp(words[0]), like).res
        else:
            step = len(words) // shape[0]
            rows = [_literal(b, block, shape[1:], words[k * step:(k + 1) * step], like) for k in range(shape[0])]
            value = b.resolved(block, "stack", rows, like, (str(shape[0]),))
        b.literals[key] = value
    return b.literals[key]


def _per_element(b: _Directions, block: Block, tangent: SSAValue, y: SSAValue, like: Operation,
                 zeros: dict) -> SSAValue:
    """`tangent` (of y's type) as a per-element value: itself, or where it is uniform (y
    affine in x with uniform factors, its tangent along a unit direction then made of literals
    alone) the sum with zeros of y (made once: `zeros`), so that the Jacobian is a value of
    each element, as `jacobian_program` promises (the sum changes no entry but a negative
    zero's sign)."""
    if not is_uniform(tangent, b.uniform_args):  # (the block is not a program's yet: its uniform inputs named)
        return tangent
    if y not in zeros:
        zeros[y] = b.zeros(block, y, like)
    return b.resolved(block, "add", [tangent, zeros[y]], like)


def _tangent_of(b: _Directions, block: Block, tangent: dict, y: SSAValue, like: Operation, zeros: dict) -> SSAValue:
    """Output y's tangent along one direction (`tangent`: its map) as a per-element value:
    `_per_element` of it, or zeros of y where y does not change along it."""
    if y not in tangent:
        return b.zeros(block, b.value[y], like)
    return _per_element(b, block, tangent[y], b.value[y], like, zeros)


def _stacked(b: _Directions, block: Block, values: list[SSAValue], shape: tuple[int, ...], like: Operation):
    """`values` (one per entry of `shape`, in row-major order) as one array shaped
    (*shape, *value shape)."""
    if not shape:
        return values[0]
    step = len(values) // shape[0]
    rows = [_stacked(b, block, values[k * step:(k + 1) * step], shape[1:], like) for k in range(shape[0])]
    return b.resolved(block, "stack", rows, like, (str(shape[0]),))


def jacobian_program(program: ProgramOp, of: str, wrt: Sequence[str], library, prefix: str = "d",
                     who: str = "kas-jacobian", names: Sequence[str] = ()) -> ProgramOp:
    """The program of `program`'s outputs and, for each input in `wrt`, the Jacobian of output
    `of` by it (see the module), named `names` where given; UsageError for names that are not
    the program's, values that are not per element, or a Jacobian of more than `MAX_AXES`
    axes."""
    where = f"{who} on @{program.sym_name.data}"
    inputs = program.inputs
    y = _output(program, of, where)
    names = list(names) or [f"{prefix}{of}_{prefix}{x}" for x in wrt]
    check_derivative_names(program, wrt, prefix, where, "Jacobian", names)
    args = program.body.block.args
    for x in wrt:
        if x in program.nodal:
            raise UsageError(f"{where}: '{x}' is nodal; a per-element Jacobian is by per-element or uniform inputs")
        axes = len(_shape(args[inputs.index(x)])) + len(_shape(y))
        if axes > MAX_AXES:
            raise UsageError(f"{where}: d{of}/d{x} would have {axes} axes ({_shape(y)} by "
                             f"{_shape(args[inputs.index(x)])}); a value has at most {MAX_AXES}")
    b, block, directions = _directed(program, y, wrt, library, prefix, where)
    ret = program.return_op
    jacobians = []
    for x, name in zip(wrt, names):
        shape = _shape(args[inputs.index(x)])
        zeros: dict = {}
        dy = [_tangent_of(b, block, t, y, ret, zeros) for t, (w, _) in zip(b.tangents, directions) if w == x]
        stacked = _stacked(b, block, dy, shape, ret)
        if shape and _shape(y):  # (x's axes after y's: a permutation)
            xl, yl = LETTERS_OF_X[:len(shape)], LETTERS_OF_Y[:len(_shape(y))]
            stacked = b.resolved(block, "contract", [stacked], ret, contract_params(f"{xl}{yl}->{yl}{xl}", 1))
        stacked.name_hint = ssa_hint(name)
        jacobians.append(stacked)
    b.emit(block, ReturnOp([b.value[v] for v in ret.values] + jacobians), ret)
    new = ProgramOp(f"{program.sym_name.data}_jacobian", list(inputs), block.arg_types, list(program.outputs) + names,
                    Region(block), uniform=list(program.uniform), nodal=list(program.nodal))
    new.location = program.location
    return new


def diagonal_program(program: ProgramOp, of: str, wrt: str, library, name: str = "diagonal",
                     who: str = "kas-jacobian") -> ProgramOp:
    """The program of the diagonal of `jacobian_program`'s Jacobian of output `of` by input
    `wrt`, the two of one shape: output `name`, shaped as they are, entry k the derivative of
    y[k] by x[k] (the Jacobian's entry (k, k)), alone: the program's other outputs dropped.
    The same directions as the Jacobian's, each followed to the one entry it gives (what only
    the other entries read is dead); UsageError where y and x differ in shape."""
    where = f"{who} on @{program.sym_name.data}"
    args = program.body.block.args
    y = _output(program, of, where)
    if wrt not in program.inputs:
        raise UsageError(f"{where}: '{wrt}' is not an input (its inputs: {', '.join(program.inputs)})")
    if wrt in program.nodal:
        raise UsageError(f"{where}: '{wrt}' is nodal; a per-element Jacobian is by per-element or uniform inputs")
    x_shape = _shape(args[program.inputs.index(wrt)])
    if _shape(y) != x_shape:
        raise UsageError(f"{where}: '{of}' is shaped {_shape(y)} and '{wrt}' {x_shape}: a diagonal is of a square "
                         "Jacobian")
    ret = program.return_op
    zeros: dict = {}
    entries: list = []

    def entry(b: _Directions, block: Block, k: int, direction: tuple) -> None:
        # (direction k's tangent of y cut to its own entry as soon as it is made: item i of item
        # j ... of the tangent along direction (j, ..., i))
        value = _tangent_of(b, block, b.tangents[k], y, ret, zeros)
        for i in direction[1]:
            value = b.resolved(block, "item", [value], ret, (str(i),))
        entries.append(value)

    b, block, _ = _directed(program, y, [wrt], library, "d", where, each=entry)
    diagonal = _stacked(b, block, entries, x_shape, ret)
    diagonal.name_hint = ssa_hint(name)
    b.emit(block, ReturnOp([diagonal]), ret)
    new = ProgramOp(f"{program.sym_name.data}_diagonal", list(program.inputs), block.arg_types, [name],
                    Region(block), uniform=list(program.uniform), nodal=list(program.nodal))
    new.location = program.location
    return new


def _output(program: ProgramOp, of: str, where: str) -> SSAValue:
    """Output `of`'s value; UsageError where it is none, or no per-element value."""
    if of not in program.outputs:
        raise UsageError(f"{where}: '{of}' is not an output (its outputs: {', '.join(program.outputs)})")
    y = program.return_op.values[program.outputs.index(of)]
    if not differentiable(y) or of in program.nodal or is_uniform(y):
        raise UsageError(f"{where}: output '{of}' is not a per-element value (a mask, nodal or one for the batch): "
                         "it has no per-element Jacobian" + (
                             "; a nodal output's tangent over the mesh is a sparse matrix: irfuse.jacobian of the "
                             "compiled program (irfuse.compile), or irfuse.tangent_matrix" if of in program.nodal
                             else ""))
    return y


def _directed(program: ProgramOp, y: SSAValue, wrt: Sequence[str], library, prefix: str, where: str,
              each=None):
    """(the builder of `program`'s statements copied once into a new block, each followed by
    its tangents along every unit direction of the inputs in `wrt`; that block; the
    directions, (input, entry) in row-major order): UsageError where `wrt` names nothing,
    CompileError where output value `y` reads a reduction over the batch of a value that
    changes with them. With `each`, the statements are copied first and then each direction's
    tangents of them all, `each(builder, block, k, direction)` called after direction k's
    (`_Directions.by_direction`)."""
    by_direction = each is not None
    if not wrt:
        raise UsageError(f"{where}: wrt names no input")
    inputs, ret = program.inputs, program.return_op
    args = program.body.block.args
    block = Block(arg_types=[a.type for a in args])
    for a, new in zip(args, block.args):
        new.name_hint = a.name_hint
    # One direction for each entry of each input in wrt, all followed at once.
    directions = [(x, entry) for x in wrt
                  for entry in itertools.product(*[range(n) for n in _shape(args[inputs.index(x)])])]
    b = _Directions(library, prefix, len(directions), by_direction)
    if by_direction:
        b.varies.update(args[inputs.index(x)] for x in wrt)
    for a, new, name in zip(args, block.args, inputs):
        b.value[a] = new
        if name in program.uniform:
            b.uniform_args.add(new)
    for tangent, (x, entry) in zip(b.tangents, directions):
        tangent[args[inputs.index(x)]] = _unit(b, block, _shape(args[inputs.index(x)]), entry, ret)
    b.statements([op for op in program.body.block.ops if not isinstance(op, ReturnOp)], block)
    if y in b.batch_wide:
        of = program.outputs[list(ret.values).index(y)]
        raise CompileError(located(f"{where}: d{of}/d{'/'.join(wrt)} is not per element: '{of}' reads this "
                                   "reduction over the batch of a value that changes with them",
                                   b.batch_wide[y].location))
    if by_direction:
        b.tangents_by_direction(block, lambda k: each(b, block, k, directions[k]))
    return b, block, directions
