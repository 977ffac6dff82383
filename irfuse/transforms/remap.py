"""Thread remapping: calls needing fewer threads per element than their kernel run on the
block's first threads, renumbered (one element a thread only)."""

from __future__ import annotations

from irfuse.kernel.model import KernelModel


def remap_threads(model: KernelModel, *, copy: bool = True) -> KernelModel:
    """Calls whose implementation uses fewer threads per element than the kernel run on the
    block's first threads, renumbered (x only when that dimension differs). Not in a kernel
    whose threads run several elements each: there every element keeps its thread row."""
    out = model.copy() if copy else model
    for op in out.calls():
        op.remap = op.impl.bx != out.bx and out.per_thread == 1  # type: ignore[union-attr]
    return out


