"""Nodal statements before the gathers recomputed where their values are gathered.

A nodal statement whose value only gathers read (`u1 = vadd3(u, svmul3(v, dt))`, then
`ue = gather(u1, conn)`) runs in a pass over the nodes of its own, which writes the value for
the elements to gather (`transforms.node_phases`). Gathering its operands instead and applying
the statement to each gathered row gives the same rows (the same op on the same words), in
the element kernel: no pass over the nodes, no array of the value, at the price of the
statement's arithmetic once per element and row instead of once per node and of gathering
its operands' rows instead of the value's. `driver.compile.compile_stages` plans both and
keeps the one its cost model prices lower.

`recomputable(program)`: the statements that can be so (not returned, read only by top-level
gathers and by one another, reading nodal inputs, uniform values and one another);
`recompute_where_gathered(module, library)`: the module with each top-level gather of them
replaced by the rows recomputed (each row's operands `item`s of the operands' gathers, the
rows `stack`ed), the statements removed.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from irfuse.dialects.kas import CallOp, GatherOp, ProgramOp, is_uniform, nodal_statements, program_of


def recomputable(program: ProgramOp) -> list[CallOp]:
    """The nodal statements a gather may recompute (see the module), in program order."""
    returned = set(program.return_op.values)
    nodal_inputs = {a for name, a in zip(program.inputs, program.body.block.args) if name in program.nodal}
    chosen = [op for op in nodal_statements(program) if isinstance(op, CallOp) and op.res not in returned]
    changed = True
    while changed:
        made = {op.res for op in chosen}
        kept = []
        for op in chosen:
            reads = all(a in nodal_inputs or a in made or is_uniform(a) for a in op.args)
            read_by = all((isinstance(u.operation, GatherOp) and u.operation.parent_op() is program
                           and u.index == 0) or u.operation in chosen for u in op.res.uses)
            if reads and read_by and op.res.uses:
                kept.append(op)
        changed = len(kept) != len(chosen)
        chosen = kept
    return chosen


def recompute_where_gathered(module: ModuleOp, library) -> ModuleOp | None:
    """The module (a clone) with the gathers of `recomputable` statements recomputing them
    row by row, or None where there are none."""
    module = module.clone()
    program = program_of(module)
    statements = recomputable(program)
    if not statements:
        return None
    chosen = {op.res: op for op in statements}
    block = program.body.block
    for gather in [op for op in block.ops if isinstance(op, GatherOp) and op.nodal in chosen]:
        k = gather.index.type.count.data  # type: ignore[attr-defined]
        gathered: dict[SSAValue, SSAValue] = {}  # an operand's gather through this connectivity

        def emit(op: Operation) -> SSAValue:
            block.insert_op_before(op, gather)
            op.location = gather.location  # type: ignore[attr-defined]
            return op.results[0]

        def row(v: SSAValue, a: int, memo: dict) -> SSAValue:
            if v in memo:
                return memo[v]
            if v in chosen:
                op = chosen[v]
                got = emit(CallOp(op.op_name, [row(x, a, memo) for x in op.args], op.res.type))
            elif is_uniform(v):
                got = v
            else:  # a nodal input: row a of its gather
                if v not in gathered:
                    gathered[v] = emit(GatherOp(v, gather.index))
                item = library.resolve("item", [gathered[v].type], (str(a),))
                got = emit(CallOp(item.name, [gathered[v]], item.result_type))
            memo[v] = got
            return got
        rows = [row(gather.nodal, a, {}) for a in range(k)]
        stack = library.resolve("stack", [r.type for r in rows], (str(k),))
        value = emit(CallOp(stack.name, rows, stack.result_type))
        value.name_hint = gather.res.name_hint
        gather.res.replace_all_uses_with(value)
        gather.detach()
        gather.erase()
    for op in reversed(statements):
        if not op.res.uses:
            op.detach()
            op.erase()
    module.verify()
    return module
