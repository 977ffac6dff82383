"""Kernels whose shared memory bounds their blocks, built again with their loads by their
readers (`fuse.kernel`'s `loads_by_readers`, `transforms.reader_loads`).

After NVRTC has compiled a module, ptxas's registers tell how many blocks of each kernel an SM
holds by its registers. A kernel whose shared memory holds fewer, and which has loaded values
that several threads of an element read (a high-order element's stored factors), is marked;
the module's in-kernel steps from `fuse-load-by-readers` on are run again and the module built
again. The second build is kept where each marked kernel gains resident blocks without spilling
more than the first kept; otherwise the first. The planner's count of registers cannot make
this choice (`transforms.reader_loads`); ptxas's figures can, at the cost of a second build of
the modules that have such kernels (high-order operators at the orders whose factors fill
shared memory: BP3 and BP1 at orders 6 and 7 in float64)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp, UnitAttr

from irfuse.dialects.fuse import KernelOp
from irfuse.kernel.bridge import model_from_kernel
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.transforms.reader_loads import movable_values

# The default pipeline's passes from the mark's on: what marking a kernel changes, run again on
# the lowered module.
AFTER_MARK = DEFAULT_PIPELINE[DEFAULT_PIPELINE.index("fuse-load-by-readers"):]


def _resident(info, resources, itemsize: int) -> tuple[int, int]:
    """(blocks an SM holds, blocks its registers alone would let it hold) for a compiled kernel."""
    from irfuse.planner.cost import resident_blocks
    from irfuse.planner.profiles import H100  # (sm_90's shared memory and every GPU's registers an SM)

    regs = max(resources.registers, 1)
    return (resident_blocks(H100, info.threads, info.total_shared_bytes(itemsize), regs),
            resident_blocks(H100, info.threads, 0, regs))


def shared_bound_kernels(module: ModuleOp, program, itemsize: int) -> list[str]:
    """The kernels of a built program whose shared memory holds fewer of their blocks than
    their registers would, and that have values to load by their readers."""
    ops = {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}
    out = []
    for info in program.kernels:
        r = program.resources(info.name)
        op = ops.get(info.name)
        if r is None or op is None or op.loads_by_readers is not None:
            continue
        held, by_registers = _resident(info, r, itemsize)
        if held < by_registers and movable_values(model_from_kernel(op, itemsize)[0]):
            out.append(info.name)
    return out


def with_loads_by_readers(module: ModuleOp, program, itemsize: int, spill_kept: int,
                          build_again: Callable[[ModuleOp], object], lower_again: Callable[[ModuleOp, str], ModuleOp]):
    """`program` (built from `module`), or the program built again with its shared-bound
    kernels marked (see the module's docstring), where each of them gains resident blocks and
    spills no more than `spill_kept` bytes a thread or than it did: `lower_again(module,
    AFTER_MARK)` runs the steps on a marked copy, `build_again` builds it."""
    marked = shared_bound_kernels(module, program, itemsize)
    if not marked:
        return program
    again = module.clone()
    for op in again.walk():
        if isinstance(op, KernelOp) and op.sym_name.data in marked:
            op.attributes["loads_by_readers"] = UnitAttr()
    second = build_again(lower_again(again, AFTER_MARK))
    for name in marked:
        before, after = program.resources(name), second.resources(name)
        info = next(k for k in program.kernels if k.name == name)
        info2 = next((k for k in second.kernels if k.name == name), None)
        if after is None or info2 is None:
            return program
        if (_resident(info2, after, itemsize)[0] <= _resident(info, before, itemsize)[0]
                or after.spill_stores + after.spill_loads > max(before.spill_stores + before.spill_loads, spill_kept)):
            return program
    return second
