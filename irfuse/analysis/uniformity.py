"""What each value of a program holds: one value per element of the batch, one value for the
whole batch (uniform), a reduction's per-block partials, or one value per node of a mesh; what the runtime allocates for
each and what `-test-print-uniformity` shows.

In a `kas` program this is `kas.is_uniform`. After lowering, a `fuse.launch` result is
uniform when its kernel runs `once`, partials when the kernel stores it with `reduce`, and
per element otherwise; a `fuse.combine` result is uniform.
"""

from __future__ import annotations

from xdsl.ir import Block, SSAValue
from xdsl.traits import SymbolTable
from xdsl.utils.str_enum import StrEnum

from irfuse.dialects import fuse, kas


class Extent(StrEnum):
    ELEMENT = "element"
    UNIFORM = "uniform"
    PARTIALS = "partials"
    NODAL = "nodal"  # one value per node of a mesh: a nodal input, a kas.scatter's result


def launched_kernel(launch: fuse.LaunchOp) -> fuse.KernelOp:
    kernel = SymbolTable.lookup_symbol(launch, launch.kernel)
    assert isinstance(kernel, fuse.KernelOp), launch.kernel_name  # the launch's verifier checks it
    return kernel


def value_extent(v: SSAValue) -> Extent:
    owner = v.owner
    if isinstance(owner, kas.ScatterOp) or kas.is_nodal_input(v):
        return Extent.NODAL
    if isinstance(owner, fuse.LaunchOp):
        kernel = launched_kernel(owner)
        if kernel.runs_once:
            return Extent.UNIFORM
        out = kernel.output_args[v.index]  # type: ignore[attr-defined]
        stores = [u.operation for u in out.uses if isinstance(u.operation, fuse.StoreOp)]
        return Extent.PARTIALS if stores and stores[0].reduce is not None else Extent.ELEMENT
    return Extent.UNIFORM if is_uniform(v) else Extent.ELEMENT


def is_uniform(v: SSAValue) -> bool:
    """`kas.is_uniform`, through the launches and combines of a partly lowered program too (a
    call whose operands a `once` launch or a `fuse.combine` made is uniform)."""
    memo = kas.uniform_memo()
    if memo is None:
        return _is_uniform(v)
    key = ("lowered", v)
    known = memo.get(key)
    if known is None:
        known = memo[key] = _is_uniform(v)
    return known


def _is_uniform(v: SSAValue) -> bool:
    stack, seen = [v], {v}
    while stack:
        w = stack.pop()
        owner = w.owner
        if isinstance(owner, kas.CallOp):
            stack.extend(a for a in owner.args if a not in seen)
            seen.update(owner.args)
        elif isinstance(owner, fuse.LaunchOp):
            if not launched_kernel(owner).runs_once:
                return False
        elif not isinstance(owner, (fuse.CombineOp, kas.ConstantOp, kas.ReduceOp)) and not (
                isinstance(owner, Block) and kas.is_uniform(w)):
            return False
    return True
