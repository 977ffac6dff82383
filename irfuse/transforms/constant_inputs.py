"""Uniform inputs fixed when the program is compiled (`irfuse.compile(..., constants=...)`):
each named input's uses take a `kas.table` of the given numbers instead, and the input leaves
the program, so a call no longer passes it.

Why: a table every element reads (a high-order element's 1-D basis and its derivative, B and
D) is otherwise copied into each block's shared memory and read from there by every
contraction, a load through the pipe that bounds those kernels; as a literal table it is a
constant of the kernel, read by the GPU's arithmetic from its constant bank with no load (the
bake-off's BK3 at orders 6-7: 1.5-1.65x faster with the contractions along their summed axes,
benchmarks/NOTES.md, High-order elements, 2026-12-04 (night, later)).

Refused, by name: a name that is not an input of the program, an input that is not uniform (one
value for the whole batch), an index input, an array whose shape is neither the input's nor
flat with its number of words."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr

from irfuse.diagnostics import UsageError
from irfuse.dialects import kas


def fix_inputs(program: kas.ProgramOp, constants: Sequence[tuple[str, tuple[int, ...], tuple[float, ...]]]) -> None:
    """Puts a `kas.table` of each constant's numbers in place of the uniform input of its name
    (`CompileOptions.constants`: (name, shape as given, numbers in C order))."""
    if not constants:
        return
    block = program.body.block
    names = program.inputs
    uniform = set(program.uniform)
    for name, shape, numbers in constants:
        if name not in names:
            raise UsageError(f"constants['{name}']: the program has no input '{name}' "
                             f"(its inputs: {', '.join(names) or 'none'})")
        arg = block.args[names.index(name)]
        t = arg.type
        if isinstance(t, kas.IndexType):
            raise UsageError(f"constants['{name}']: '{name}' is an index input; only uniform numeric inputs may be "
                             "constants")
        if name not in uniform:
            raise UsageError(f"constants['{name}']: '{name}' is not a uniform input (one value for the whole batch); "
                             "only those may be fixed when compiling")
        want = tuple(t.shape)  # type: ignore[attr-defined]
        if tuple(shape) not in (want, (t.size,)) and not (t.size == 1 and tuple(shape) == ()):  # type: ignore
            raise UsageError(f"constants['{name}'] is shaped {tuple(shape)}; '{name}' is a {t} of shape {want}")
        table = kas.TableOp(numbers, t)
        block.insert_op_before(table, block.first_op) if block.first_op is not None else block.add_op(table)
        arg.replace_all_uses_with(table.res)
    keep = [k for k, n in enumerate(names) if n not in {c[0] for c in constants}]
    for k in reversed(range(len(names))):
        if k not in keep:
            block.erase_arg(block.args[k])
    program.input_names = ArrayAttr(StringAttr(names[k]) for k in keep)
    left = [n for n in program.uniform if n not in {c[0] for c in constants}]
    if left:
        program.uniform_inputs = ArrayAttr(StringAttr(n) for n in left)
    elif program.uniform_inputs is not None:
        del program.properties["uniform_inputs"]
