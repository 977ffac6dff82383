"""Shared driver of the in-kernel passes: read each kernel into a `KernelModel`,
transform the model, write the decisions back, and check the result."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp

from irfuse.kernel.model import KernelModel
from irfuse.kernel.bridge import literal_arguments, model_from_kernel, write_back
from irfuse.dialects import fuse
from irfuse.passes.module_element_type import itemsize_of


def kernels_of(module: ModuleOp) -> list[fuse.KernelOp]:
    return [op for op in module.ops if isinstance(op, fuse.KernelOp)]


def rewrite_kernels(module: ModuleOp, transform: Callable[[KernelModel], KernelModel],
                    finish: Callable[[fuse.KernelOp, KernelModel], None] | None = None) -> None:
    """`transform` applied to every kernel; `finish`, given the kernel and the model written
    back, runs before the kernel is verified."""
    itemsize = itemsize_of(module)
    literals = literal_arguments(module)
    for kernel in kernels_of(module):
        model, mapping = model_from_kernel(kernel, itemsize, literals=literals.get(kernel.sym_name.data, {}))
        model = transform(model)
        write_back(kernel, model, mapping)
        if finish is not None:
            finish(kernel, model)
        kernel.verify()
