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
    known = {} if memo is None else memo.setdefault("lowered", {})
    return kas.uniform_through_calls(v, _uniform_leaf, known)


def _uniform_leaf(w: SSAValue) -> bool:
    owner = w.owner
    if isinstance(owner, fuse.LaunchOp):
        return launched_kernel(owner).runs_once
    if isinstance(owner, Block):
        return kas.is_uniform(w)
    return isinstance(owner, (fuse.CombineOp, kas.ConstantOp, kas.TableOp, kas.ReduceOp))
