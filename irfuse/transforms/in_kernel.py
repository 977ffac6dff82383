"""The in-kernel transformations in the order they run: the one definition that the
default pass pipeline (`irfuse.passes.registry`) and the planner's analysis of every
candidate kernel (`irfuse.planner.search`) both follow, so that a prediction describes
the kernel that is emitted."""

from __future__ import annotations

from collections.abc import Callable

from irfuse.artifact.records import record
from irfuse.kernel.model import KernelModel
from irfuse.transforms.allocation import allocate_shared
from irfuse.transforms.barriers import place_barriers
from irfuse.transforms.linearization import linearize
from irfuse.transforms.promotion import promote_registers
from irfuse.transforms.reader_loads import load_by_readers
from irfuse.transforms.remap import remap_threads


@record(frozen=True)
class InKernelStep:
    pass_name: str  # the pass that applies it to every fuse.kernel
    # with the pass's default options; `copy=False` changes the model given in place
    transform: Callable[..., KernelModel]


IN_KERNEL_STEPS: tuple[InKernelStep, ...] = (
    InKernelStep("fuse-remap-threads", remap_threads),
    InKernelStep("fuse-promote-registers", promote_registers),
    InKernelStep("fuse-linearize", linearize),
    InKernelStep("fuse-load-by-readers", load_by_readers),
    InKernelStep("fuse-allocate-shared", allocate_shared),
    InKernelStep("fuse-place-barriers", place_barriers),
)
BARRIER_STEP = "fuse-place-barriers"


def optimize(model: KernelModel, stop_before: str | None = None, copy: bool = True) -> KernelModel:
    """The steps in order, all of them or those before `stop_before`, on a copy of `model`
    (one copy: each step then changes that private model in place, `copy=False`; the planner
    runs this for thousands of candidate kernels, where a copy a step was a fifth of its time),
    or with `copy=False` on `model` itself (the planner's candidates, built for this alone)."""
    if copy:
        model = model.copy()
    for step in IN_KERNEL_STEPS:
        if step.pass_name == stop_before:
            break
        model = step.transform(model, copy=False)
    return model
