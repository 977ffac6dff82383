"""Where a reduction's partials are combined: by combine kernels, or by the reducing kernel's
last block to finish (`fuse.kernel` finish_parts; `backend.combine_emit.finish_in_last_block`).

The choice is the lowering passes' option `finish`: `kernels` (combine kernels alone),
`last-block` (the last block wherever a launch's partials fit the combine's lanes, a partial a
lane) or `auto` (the last block for launches of at most as many blocks as the cost model finds
it faster than the combine kernels: `planner.cost.finish_parts`). Either way the bits are the
same: the last block combines in the combine kernels' order. Only a run in one call on the GPU
takes the last block (the CPU backend and runs in chunks run the combine kernels)."""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr

from irfuse.diagnostics import UsageError
from irfuse.dialects import fuse
from irfuse.planner.cost import DeviceProfile, finish_parts

FINISH_CHOICES = ("auto", "last-block", "kernels")


def check_finish(choice: str, pass_name: str) -> None:
    if choice not in FINISH_CHOICES:
        raise UsageError(f"{pass_name}: finish must be one of {', '.join(FINISH_CHOICES)}, got '{choice}'")


def mark_finish(kernel: fuse.KernelOp, choice: str, profile: DeviceProfile | None) -> None:
    """Sets a reducing kernel's finish_parts by `choice` (`auto` needs the profile)."""
    if not kernel.reduces or choice == "kernels":
        return
    parts = fuse.COMBINE_LANES
    if choice == "auto":
        assert profile is not None
        reduced = [op.value.type.size for op in kernel.body.block.ops  # type: ignore[attr-defined]
                   if isinstance(op, fuse.StoreOp) and op.reduce_kind is not None]
        parts = min(parts, finish_parts(profile, fuse.finish_threads(kernel.threads), sum(reduced), len(reduced)))
    if parts:
        kernel.attributes["finish_parts"] = IntAttr(parts)
