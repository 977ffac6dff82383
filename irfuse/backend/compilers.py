"""The two compilers of generated CUDA C behind one small interface.

The emitted source (`cuda_emit`) is complete for one element type and compiles unchanged
for either target: NVRTC makes a cubin for a GPU (`nvrtc`), the host C++ compiler a shared
library whose kernels run on the CPU (`host_compile`). The driver and the devices ask for
a target's compiler here and need not know which one it is. (The runtime never does: it
runs the binaries an artifact holds, `irfuse.driver.binaries`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from irfuse.artifact.arrays import ElementType
from irfuse.artifact.artifact import CubinResult
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.backend.host_compile import build_host_library
from irfuse.backend.nvrtc import compile_cubin
from irfuse.diagnostics import UsageError
from irfuse.runtime.host_library import HostLibrary


class KernelCompiler(Protocol):
    target: str

    def compile(self, source: str, kernels: Sequence[KernelInfo], element: ElementType,
                arch: str | None = None) -> object:
        """The compiled kernels of `source`; `CompileError` naming the source's lines otherwise."""
        ...


class NvrtcCompiler:
    """CUDA C to a cubin for `arch` (the GPU present, else sm_90), with the ptxas report."""

    target = "cuda"

    def compile(self, source: str, kernels: Sequence[KernelInfo], element: ElementType,
                arch: str | None = None) -> CubinResult:
        return compile_cubin(source, arch)


class HostCompiler:
    """CUDA C to a loaded host library (`runtime.host_library.HostLibrary`) whose kernels run
    on the CPU."""

    target = "cpu"

    def compile(self, source: str, kernels: Sequence[KernelInfo], element: ElementType,
                arch: str | None = None) -> HostLibrary:
        return HostLibrary(build_host_library(source, list(kernels)), list(kernels))


COMPILERS: dict[str, KernelCompiler] = {"cuda": NvrtcCompiler(), "cpu": HostCompiler()}


def compiler_for(target: str) -> KernelCompiler:
    try:
        return COMPILERS[target]
    except KeyError:
        raise UsageError(f"no compiler for target '{target}' (there are: {', '.join(COMPILERS)})") from None
