"""The per-element part of a program over a mesh: what a tangent matrix's element blocks are
the Jacobian of.

`element_part(program, of)` is the program whose nodal output `of` is a scatter
(`r = scatter(fe, conn)`) cut at its gathers and that scatter: each gather becomes a
per-element input named after its value (`ue` for `ue = gather(u, conn)`), the scatter's
operand its one output. Its Jacobian by a gathered input (`transforms.jacobian`) is each
element's block of d r / d u: row (a, i), column (b, j) is d fe[a, i] / d ue[b, j], which
the assembly adds at (conn[e, a], conn[e, b]); its diagonal entries (a, i, a, i) alone, put
back between the program's gathers and its scatter, are the tangent's diagonal over the mesh
where no element names a node twice (`element_diagonal_program`). The program is not changed; a program with
nodal statements (passes over the nodes), a scatter inside a loop, or an output `of` that is
no scatter's is refused by name.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Region

from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import (CallOp, GatherOp, ProgramOp, ReturnOp, ScatterOp, nodal_statements, ssa_hint,
                                 variable_of_hint)
from irfuse.transforms.dead_code import keep_only, set_name_lists


def element_part(program: ProgramOp, of: str, who: str = "tangent_matrix") -> tuple[ProgramOp, dict, str]:
    """(the per-element program, gathered input name -> (nodal input, connectivity input),
    the scatter's connectivity input) of a program over a mesh whose output `of` is a
    scatter (see the module)."""
    where = f"{who} on @{program.sym_name.data}"
    if of not in program.outputs:
        raise UsageError(f"{where}: '{of}' is not an output (its outputs: {', '.join(program.outputs)})")
    if program.nodal and nodal_statements(program):
        raise UsageError(f"{where}: the program has nodal statements (passes over the nodes); a tangent matrix "
                         "is taken of a program of gathers, element code and scatters")
    clone = program.clone()
    block = clone.body.block
    names = {a: n for a, n in zip(block.args, clone.inputs)}
    scatter = clone.return_op.values[clone.outputs.index(of)].owner
    if not isinstance(scatter, ScatterOp) or scatter.parent_op() is not clone:
        raise UsageError(f"{where}: output '{of}' is not a scatter's sums (r = scatter(fe, conn))")
    conn_name = names.get(scatter.index)  # type: ignore[call-overload]
    gathered: dict[str, tuple[str, str]] = {}
    input_names = list(clone.inputs)
    for op in [op for op in clone.walk() if isinstance(op, GatherOp)]:
        if op.parent_op() is not clone:
            raise UsageError(f"{where}: a gather inside a loop")
        base = variable_of_hint(op.res.name_hint) if op.res.name_hint else "gathered"
        name, k = base, 1
        while name in input_names:
            name, k = f"{base}_{k}", k + 1
        arg = block.insert_arg(op.res.type, len(block.args))
        arg.name_hint = ssa_hint(name)
        input_names.append(name)
        gathered[name] = (names[op.operands[0]], names[op.index])  # type: ignore[index]
        op.res.replace_all_uses_with(arg)
        op.detach()
        op.erase()
    value = scatter.operands[0]
    out = variable_of_hint(value.name_hint) if value.name_hint else "rows"
    input_names = keep_only(clone, [(out, value)], input_names, keep=list(gathered))  # (a row nothing reads
    # has a Jacobian too: zeros)
    set_name_lists(clone, {"uniform_inputs": [n for n in input_names if n in program.uniform], "nodal_names": []})
    clone.sym_name = StringAttr(f"{program.sym_name.data}_elements")
    clone.verify()
    return clone, gathered, conn_name


def element_jacobian_program(program: ProgramOp, of: str, wrt: str, library,
                             who: str = "tangent_matrix") -> tuple[ProgramOp, dict, str, str]:
    """(the per-element Jacobian of `program`'s part between its gathers and the scatter that
    makes output `of`, by the gathered rows of nodal input `wrt`: each element's block (K, D,
    K, D); the gathered inputs: name -> (nodal input, connectivity input); the scatter's
    connectivity input; the blocks' output name). Refused by name: `wrt` not gathered once
    through the scatter's connectivity, or blocks that are not square."""
    from irfuse.transforms.jacobian import jacobian_program

    elements, gathered, conn = element_part(program, of, who)
    names = [_gathered_once(gathered, of, wrt, conn, who)]
    jac = jacobian_program(elements, elements.outputs[0], names, library, who=who)
    _square(program, of, wrt, who)
    return jac, gathered, conn, jac.outputs[-1]


def _square(program: ProgramOp, of: str, wrt: str, who: str) -> None:
    """Refused by name unless nodal output `of` and nodal input `wrt` hold values of one
    shape (the tangent's blocks square)."""
    shapes = dict(zip(program.inputs, (tuple(getattr(t, "shape", ())) for t in program.input_types())))
    of_shape = tuple(program.return_op.values[program.outputs.index(of)].type.shape)  # type: ignore[attr-defined]
    if of_shape != shapes[wrt]:
        raise UsageError(f"{who}: '{of}' holds values shaped {of_shape} a node and '{wrt}' {shapes[wrt]}: the "
                         "blocks of a tangent matrix are square")


def element_diagonal_program(program: ProgramOp, of: str, wrt: str, library,
                             who: str = "diagonal") -> tuple[ProgramOp, str]:
    """(the program over the mesh of the diagonal of `program`'s tangent d of / d wrt where no
    element names a node twice: `program`'s gathers, the diagonal of each element's block
    (`transforms.jacobian.diagonal_program` of `element_part`: entry (a, i) the block's (a, i,
    a, i)), and its scatter through the connectivity `of` is scattered through, one kernel
    as the residual's, no block stored; its output's name). The element blocks' diagonal
    entries (a, i, b, i) of two slots naming one node are not in it: the caller checks the
    connectivity. Refused by name as `element_jacobian_program` refuses."""
    from irfuse.transforms.jacobian import diagonal_program

    elements, gathered, conn = element_part(program, of, who)
    name = _gathered_once(gathered, of, wrt, conn, who)
    _square(program, of, wrt, who)
    out = "diagonal"
    while out in program.inputs:
        out = f"{out}_of_{wrt}"
    scatter = program.return_op.values[program.outputs.index(of)].owner
    elements.return_op.location = scatter.location  # (what the diagonal adds is located at the scatter)
    rows = diagonal_program(elements, elements.outputs[0], name, library, f"{out}_rows", who)
    # Back over the mesh: the gathered rows gathered again, the diagonal's rows scattered.
    block = Block(arg_types=program.input_types())
    args = dict(zip(program.inputs, block.args))
    for a, hint in zip(block.args, program.body.block.args):
        a.name_hint = hint.name_hint
    # (`element_part` names the gathers in the order of the walk: each keeps its location)
    located = dict(zip(gathered, (op.location for op in program.walk() if isinstance(op, GatherOp))))
    values: dict = {}
    for arg, input_name in zip(rows.body.block.args, rows.inputs):
        if input_name in gathered:
            nodal, index = gathered[input_name]
            gather = GatherOp(args[nodal], args[index])
            gather.location = located[input_name]
            gather.res.name_hint = arg.name_hint
            block.add_op(gather)
            values[arg] = gather.res
        else:
            values[arg] = args[input_name]
    for op in rows.body.block.ops:
        if op is rows.return_op:
            break
        block.add_op(op.clone(value_mapper=values))
    sums = ScatterOp(values[rows.return_op.values[0]], args[conn])
    sums.location = scatter.location
    sums.res.name_hint = ssa_hint(out)
    block.add_op(sums)
    block.add_op(ReturnOp([sums.res]))
    new = ProgramOp(f"{program.sym_name.data}_diagonal", list(program.inputs), program.input_types(), [out],
                    Region(block), uniform=list(program.uniform), nodal=[*program.nodal, out])
    new.location = program.location
    names = keep_only(new, [(out, sums.res)], list(program.inputs))
    set_name_lists(new, {"uniform_inputs": [n for n in names if n in program.uniform],
                         "nodal_names": [n for n in names if n in program.nodal] + [out]})
    new.verify()
    return new, out


def _gathered_once(gathered: dict, of: str, wrt: str, conn: str, who: str) -> str:
    """The element part's input that is nodal input `wrt` gathered through `conn` (the
    connectivity output `of` is scattered through); refused by name unless it is gathered
    once, through it."""
    names = [n for n, (nodal, c) in gathered.items() if nodal == wrt]
    if len(names) != 1 or gathered[names[0]][1] != conn:
        raise UsageError(f"{who}: '{wrt}' must be gathered once, through '{conn}' (the connectivity '{of}' is "
                         f"scattered through); it is gathered {len(names)} time(s)")
    return names[0]


def element_rows_program(program: ProgramOp, of: str, wrt: str, library,
                         who: str = "tangent_matrix") -> tuple[ProgramOp, str, str] | None:
    """(the vector-Jacobian product of `program`'s element part (`element_part`) by the
    gathered rows of nodal input `wrt` (`transforms.reverse_mode`, loops unrolled): the
    element's inputs and a cotangent of its rows, returning its rows and the cotangent of
    the gathered rows of `wrt`; the cotangent's input name; the product's output name).
    With the cotangent 1 at row (a, i) and 0 elsewhere the product is block row (a, i) of
    the element's Jacobian: a node's D rows of the block from D reverse sweeps where the
    Jacobian's forward mode takes K x D directions (the owner-computes assembly on the GPU,
    `backend.rows_emit`). None where it cannot be made (the Jacobian then serves, and refuses
    by name what it cannot take)."""
    from irfuse.diagnostics import CompileError
    from irfuse.transforms.reverse_mode import reverse_derivative

    prefix = "irf_row_"
    try:
        elements, gathered, conn = element_part(program, of, who)
        name = _gathered_once(gathered, of, wrt, conn, who)
        vjp = reverse_derivative(elements, [name], library, prefix=prefix, loops="unroll", who=who)
    except (UsageError, CompileError):
        return None
    return vjp, prefix + elements.outputs[0], prefix + name


def assembly_program(jacobian: ProgramOp, blocks: str, library, who: str = "tangent_matrix") -> ProgramOp:
    """`jacobian` (a per-element program, `element_part`'s Jacobian) with its output `blocks`,
    each element's block (K, *v, K, *v) of a nodal value shaped v, added by a scatter into a
    sparse matrix's values: slot (a, *i, b) of the block (the entries (a, *i, b, ...), as it
    lies in memory) adds through a new connectivity input `pairs` of K x |v| x K slots into
    the nodal output `values` (shaped v), one per run of the matrix's values
    (`irfuse.mesh.assembly`). The block is never stored: the kernel that computes it adds its
    slots in the scatter's groups. The program's other outputs and what only they read are
    dropped."""
    from irfuse.dialects.kas import IndexType
    from irfuse.transforms.forward_mode import DerivativeBuilder

    clone = jacobian.clone()
    block = clone.body.block
    ret = clone.return_op
    value = ret.values[clone.outputs.index(blocks)]
    shape = tuple(value.type.shape)  # type: ignore[attr-defined]
    rank = (len(shape) - 2) // 2
    k, v = shape[0], shape[1:1 + rank]
    if len(shape) != 2 * rank + 2 or shape[1 + rank] != k or shape[2 + rank:] != v:
        raise UsageError(f"{who}: the blocks are shaped {shape}; a tangent matrix takes (K, *v, K, *v)")
    builder = DerivativeBuilder(library, "")
    ret.detach()

    def item(of, entry: int):
        op = library.resolve("item", [of.type], (str(entry),))
        return builder.emit(block, CallOp(op.name, [of], op.result_type), ret).res

    # Slot (a, *i, b), in row-major order: item b of item i... of item a, each taken once.
    level = [value]
    for n in (k, *v, k):
        level = [item(of, entry) for of in level for entry in range(n)]
    slots = len(level)
    stack = library.resolve("stack", [s.type for s in level], (str(slots),))
    rows = builder.emit(block, CallOp(stack.name, level, stack.result_type), ret).res
    rows.name_hint = ssa_hint("slots")
    pairs = block.insert_arg(IndexType(slots), len(block.args))
    pairs.name_hint = ssa_hint("pairs")
    sums = builder.emit(block, ScatterOp(rows, pairs), ret).res
    sums.name_hint = ssa_hint("values")
    block.add_op(ret)
    names = keep_only(clone, [("values", sums)], [*clone.inputs, "pairs"])
    set_name_lists(clone, {"uniform_inputs": [n for n in names if n in jacobian.uniform],
                           "nodal_names": ["values"]})
    clone.sym_name = StringAttr(f"{jacobian.sym_name.data}_assembly")
    clone.verify()
    return clone
