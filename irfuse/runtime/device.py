"""What the executor needs of a device (the CPU, a GPU), and helpers devices share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np


class Device(Protocol):
    name: str
    # Whether a reducing kernel's last block may combine its partials (`KernelInfo.finish_parts`):
    # the GPU's kernels do; the CPU runs the combine kernels.
    finishes_in_kernel: bool
    # Whether an element kernel adds a scatter's rows into the nodes itself under atomics
    # (`scatter="atomic"`): the GPU's do; on the CPU the atomic scatter kernel adds them in order.
    atomics_in_kernel: bool

    def upload(self, a: np.ndarray): ...
    def upload_integers(self, a: np.ndarray): ...  # an integer array as it is (connectivities, their inverses)
    def download(self, buf, shape: tuple[int, ...]) -> np.ndarray: ...
    def alloc(self, shape: tuple[int, ...]): ...
    def write(self, buf, a: np.ndarray) -> None: ...  # host array into an existing buffer
    def read_into(self, out: np.ndarray, buf) -> None: ...  # a buffer into an existing host array
    def copy(self, dst, src) -> None: ...
    def launcher(self, kernel: str, buffers: list, n: int) -> Callable[[], None]: ...
    def batch(self, steps: list[Callable[[], None]]) -> Callable[[], None]: ...
    def synchronize(self) -> None: ...
    def free_memory(self) -> int | None: ...  # free device bytes (None: host memory, no default budget)
    def timer(self): ...
    def close(self) -> None: ...


class Slot:
    """A buffer that a recorded run reads or writes through, pointed at the caller's own
    memory before each replay (`ptr`, `nbytes`; on the CPU also the NumPy `array`):
    launches and copies take its address when they run, not when they are recorded."""

    __slots__ = ("ptr", "nbytes", "array")

    def __init__(self) -> None:
        self.ptr = 0
        self.nbytes = 0
        self.array = None

    def __int__(self) -> int:
        return self.ptr


def in_order(steps: list[Callable[[], None]]) -> Callable[[], None]:
    """One call that runs the steps one after another."""
    def run() -> None:
        for step in steps:
            step()
    return run
