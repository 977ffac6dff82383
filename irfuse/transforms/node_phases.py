"""A program over a mesh with nodal statements, cut into the passes over nodes and over
elements that run it.

A nodal statement (a call that reads nodal values, `kas.nodal_statements`) runs once per
node, and a reduction of a nodal value runs over the nodes; the rest of a program over a
mesh runs per element, its scatters adding the elements' rows into nodes. What the nodal
statements compute from the inputs alone (a displacement predicted from the velocity, say)
is needed before the elements gather it; what they compute from a scatter's sums (an
acceleration from the residual and the lumped mass) needs every element first. So the
program runs as passes, each an ordinary `kas.program`, nodes and elements in turn:

- **nodes, before** (pass 0): the nodal statements and reductions over the nodes that read
  no value of an element pass, a program over the nodes (its nodal values are plain values,
  one per node: its batch is the nodes);
- **elements** (pass 1): gathers, the element code and scatters, a program over the mesh
  whose nodal inputs are the mesh's and the values the pass before made;
- **nodes, after** (pass 2): the nodal statements that read the scatters' sums (or a
  reduction over the elements), again a program over the nodes;
- and where an element statement reads what a pass over the nodes after the elements made (a
  gather of a value made from a scatter's sums: a reverse derivative gathers the cotangent of
  the sums its nodal statements read), a second pass over the elements (3), the nodes after it
  (4), and so on: each op runs in the first pass of its kind after every pass it reads.

A value one pass makes and a later one reads is an output of the first and an input of the
second, named after its variable (or after the output it is, where that is no input's name):
a per-element value read by a later pass over the elements goes between them as an array of
the elements. Constants and uniform values computed from the inputs alone are recomputed
where read. Each pass takes only the inputs it reads.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, located
from irfuse.dialects.kas import (ConstantOp, GatherOp, ProgramOp, ReduceOp, ReturnOp, ScatterOp, is_uniform,
                                 nodal_statements, nodal_values, program_of, ssa_hint, variable_of_hint)
from irfuse.transforms.dead_code import keep_only, set_name_lists

NODES_BEFORE, ELEMENTS, NODES_AFTER = 0, 1, 2
PASS_NAMES = {NODES_BEFORE: "nodes_before", ELEMENTS: "elements", NODES_AFTER: "nodes_after"}


@record(frozen=True)
class NodePass:
    module: ModuleOp  # an ordinary kas.program: over the nodes, or over the mesh's elements
    over: str  # "nodes" or "elements"
    inputs: tuple[str, ...]  # what it takes: the program's inputs, or values of an earlier pass
    outputs: tuple[str, ...]  # what it gives: the program's outputs, and values later passes read


@record(frozen=True)
class NodePlan:
    passes: tuple[NodePass, ...]  # in the order they run
    made: frozenset[str]  # the names passes give that are not the program's inputs


def has_nodal_statements(module: ModuleOp) -> bool:
    """Whether the module's program works per node (nodal statements, reductions of nodal values)
    and so runs as `NodePlan` passes."""
    program = program_of(module)
    return bool(program.nodal) and bool(nodal_statements(program))


def refuse_nodal_statements(program: ProgramOp, pass_name: str) -> None:
    """A CompileError at the program's first nodal statement, for a pass that plans kernels
    over one batch: such a program is planned pass by pass (`kas-split-nodes`)."""
    statements = nodal_statements(program) if program.nodal else []
    if statements:
        raise CompileError(located(
            f"{pass_name}: @{program.sym_name.data} works per node (nodal statements, reductions of nodal values); "
            "it is planned as its passes over nodes and elements, each a program of its own", statements[0].location,
            ["irfuse.compile and `irfuse run` cut it so; irfuse-opt -p 'kas-split-nodes{which=K}' shows pass K"]))


def _pass_of_ops(program: ProgramOp) -> dict[Operation, int | None]:
    """Each top-level op's pass (even: over the nodes, odd: over the elements); None for one
    that any pass may recompute (a constant, or a uniform value of the inputs alone)."""
    per_node = nodal_values(program)
    where: dict[Operation, int | None] = {}

    def of(v: SSAValue) -> int | None:
        owner = v.owner
        return where.get(owner) if isinstance(owner, Operation) else None

    for op in program.body.block.ops:
        if isinstance(op, ReturnOp):
            continue
        read = [p for inner in op.walk() for v in inner.operands if (p := of(v)) is not None]
        latest = max(read, default=None)
        if isinstance(op, ConstantOp):
            where[op] = None
        elif (isinstance(op, ReduceOp) and op.operand in per_node) or (
                not isinstance(op, ScatterOp) and any(r in per_node for r in op.results)):
            where[op] = _at_least(latest, NODES_BEFORE)  # per node (or over the nodes)
        elif all(is_uniform(r) for r in op.results) and not isinstance(op, ReduceOp):
            where[op] = latest
        else:  # gathers, scatters, the element code, reductions over the elements
            where[op] = _at_least(latest, ELEMENTS)
    _sink_to_first_reader(program, where)
    return where


def _sink_to_first_reader(program: ProgramOp, where: dict[Operation, int | None]) -> None:
    """A nodal statement whose values no output is and only later passes over the nodes read
    runs in the first of those, where everything it reads is there too (an input, a value
    any pass recomputes, another statement moved with it): a lumped mass's reciprocal read
    after the scatter is computed there from the mass, instead of written by the pass before
    for the pass after to read, and the pass before has a statement, often a kernel, less.
    Every such statement is moved first (the last first, so a chain moves whole), then those
    that would read a value of another pass, or be read by a statement that stayed, go back,
    until none does."""
    returned = set(program.return_op.values)
    ops = [op for op in program.body.block.ops if not isinstance(op, ReturnOp)]
    original: dict[Operation, int] = {}
    for op in reversed(ops):
        p = where.get(op)
        if p is None or p % 2 != NODES_BEFORE or isinstance(op, (ReduceOp, ScatterOp, GatherOp)) or op.regions \
                or any(r in returned for r in op.results):
            continue
        readers = [where.get(_top(u.operation, program)) for r in op.results for u in r.uses]
        if readers and all(q is not None and q % 2 == NODES_BEFORE and q > p for q in readers):
            original[op] = p
            where[op] = min(readers)  # type: ignore[type-var]
    changed = True
    while changed:
        changed = False
        for op, p in original.items():
            q = where[op]
            if q == p:
                continue
            reads_elsewhere = any(isinstance(v.owner, Operation) and where.get(v.owner) not in (None, q)
                                  for v in op.operands)
            read_earlier = any(where.get(_top(u.operation, program)) < q for r in op.results for u in r.uses)
            if reads_elsewhere or read_earlier:
                where[op] = p
                changed = True


def _at_least(latest: int | None, parity: int) -> int:
    """The first pass of `parity` (NODES_BEFORE: over the nodes; ELEMENTS: over the
    elements) at or after pass `latest` (None: the first)."""
    if latest is None:
        return parity
    return latest if latest % 2 == parity % 2 else latest + 1


def pass_name(p: int) -> str:
    """The name of pass p in the program names of its pass (`_nodes_before`, `_elements`,
    `_nodes_after`, then `_elements_2`, `_nodes_after_2`, ...)."""
    if p <= NODES_AFTER:
        return PASS_NAMES[p]
    return f"{PASS_NAMES[ELEMENTS if p % 2 else NODES_AFTER]}_{(p + 1) // 2}"


def split_at_nodal_statements(module: ModuleOp) -> NodePlan:
    """The module's program as its passes over nodes and elements (see the module). The
    module is not changed."""
    module = module.clone()
    program = program_of(module)
    where = _pass_of_ops(program)
    _gather_where_read(program, where)
    ops = [op for op in program.body.block.ops if not isinstance(op, ReturnOp)]
    present = sorted({p for p in where.values() if p is not None})
    returned = {v: out for out, v in reversed(list(zip(program.outputs, program.return_op.values)))}
    taken = {*program.inputs, *program.outputs}
    # Values a later pass reads, each named once.
    crossing: dict[SSAValue, str] = {}
    for op in ops:
        p = where[op]
        if p is None:
            continue
        for inner in op.walk():
            for v in inner.operands:
                q = where.get(v.owner) if isinstance(v.owner, Operation) else None  # type: ignore[arg-type]
                if q is not None and q < p and v not in crossing:
                    name = returned.get(v)
                    if name is None or name in program.inputs:
                        base = variable_of_hint(v.name_hint) if v.name_hint else "value"
                        name, i = base, 1
                        while name in taken:
                            name, i = f"{base}_{i}", i + 1
                        taken.add(name)
                    crossing[v] = name
    first = present[0] if present else ELEMENTS
    passes = tuple(_pass(module, p, where, crossing, first) for p in present)
    return NodePlan(passes, frozenset(crossing.values()) | frozenset(program.outputs))


def _gather_where_read(program: ProgramOp, where: dict[Operation, int | None]) -> None:
    """A gathered value read by a later pass over the elements is gathered again there (a
    kernel gathers as it loads: reading the nodes' rows again costs what reading the value as
    an array of the elements would, and a gather's value is no kernel's result to pass on)."""
    block = program.body.block
    for op in list(block.ops):
        if not isinstance(op, GatherOp):
            continue
        later: dict[int, list] = {}
        for use in list(op.res.uses):
            p = where.get(_top(use.operation, program))
            if p is not None and p > where[op]:  # type: ignore[operator]
                later.setdefault(p, []).append(use)
        for p, uses in sorted(later.items()):
            tops = list(block.ops)
            first = min((_top(u.operation, program) for u in uses), key=tops.index)
            again = op.clone()
            block.insert_op_before(again, first)
            where[again] = p
            for use in uses:
                use.operation.operands[use.index] = again.res


def _pass(module: ModuleOp, p: int, where: dict, crossing: dict[SSAValue, str], first: int) -> NodePass:
    """Pass p: the values of earlier passes it reads as inputs, its outputs and the values later
    passes read returned, everything else removed."""
    original = program_of(module)
    order = {op: k for k, op in enumerate(original.body.block.ops)}
    clone = module.clone()
    program = program_of(clone)
    twin_ops = list(program.body.block.ops)
    twin = {v: twin_ops[order[v.owner]].results[v.index] for v in crossing}  # type: ignore[index, attr-defined]
    block = program.body.block
    nodal = set(original.nodal)
    uniform = set(original.uniform)
    names = list(program.inputs)
    per_node_before = nodal_values(original)
    for v, name in crossing.items():
        q = where[v.owner]
        if q < p and any(where.get(_top(u.operation, original)) == p for u in v.uses):
            arg = block.insert_arg(v.type, len(block.args))
            arg.name_hint = ssa_hint(name)  # (a program's input is named by its argument when printed)
            twin[v].replace_all_uses_with(arg)
            names.append(name)
            if is_uniform(v):
                uniform.add(name)
            elif v in per_node_before:  # (else a per-element value of an earlier pass over the elements)
                nodal.add(name)
    outputs: list[tuple[str, SSAValue]] = []
    for out, v, tv in zip(original.outputs, original.return_op.values, program.return_op.values):
        q = where.get(v.owner) if isinstance(v.owner, Operation) else None  # type: ignore[arg-type]
        if (q if q is not None else first) == p:
            outputs.append((out, tv))
    for v, name in crossing.items():
        if where[v.owner] == p and name not in dict(outputs):
            outputs.append((name, twin[v]))
    # Only the inputs it reads: a pass over the nodes cannot take per-element arrays.
    names = keep_only(program, outputs, names)
    over_nodes = p % 2 == NODES_BEFORE
    per_node = nodal_values(program)  # (the elements pass's: its nodal inputs and its scatters' sums)
    nodal_here = [] if over_nodes else [n for n in names if n in nodal] + [
        out for out, v in outputs if v in per_node]
    set_name_lists(program, {"uniform_inputs": [n for n in names if n in uniform],
                             "nodal_names": list(dict.fromkeys(nodal_here))})
    program.sym_name = StringAttr(f"{original.sym_name.data}_{pass_name(p)}")
    program.return_op.location = original.return_op.location
    clone.verify()
    return NodePass(clone, "nodes" if over_nodes else "elements", tuple(names), tuple(out for out, _ in outputs))


def _top(op: Operation, program: ProgramOp) -> Operation:
    """The top-level op of `program` that holds `op` (itself, or the loop around it)."""
    while op.parent_op() is not program:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op
