"""The binaries of generated CUDA C the runtime runs: a cubin for a GPU architecture (NVRTC)
and a host library for the CPU (the host C++ compiler), both cached on disk; and an
artifact completed with the one a backend needs (an artifact read from a plan directory or
the program cache holds the source and, where it was compiled for a GPU, a cubin)."""

from __future__ import annotations

import copy

from irfuse.artifact.artifact import Artifact, CubinResult
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.backend.host_compile import build_host_library as _build_host_library
from irfuse.backend.nvrtc import compile_cubin


def build_cubin(source: str, arch: str | None = None) -> CubinResult:
    """The cubin of `source` for `arch` (the GPU present, else sm_90)."""
    return compile_cubin(source, arch)


def build_host_library(source: str, kernels: list[KernelInfo], renderer: str | None = None) -> str:
    """The path of the host library of `source` with a launcher per kernel; `renderer`: the
    CPU rendering (`host_compile.cpu_renderer_flags`; the default one when None)."""
    return _build_host_library(source, kernels, renderer)


def with_cpu_rendering(artifact: Artifact, renderer: str) -> Artifact:
    """A copy of `artifact` whose host library is built with CPU rendering `renderer` ("loop"
    or "emulate"), as tests and benchmarks run one plan both ways."""
    other = copy.copy(artifact)
    other.host_library = build_host_library(artifact.source, artifact.kernels, renderer)
    return other


def with_binaries(artifact: Artifact, backend: str, arch: str | None = None) -> Artifact:
    """`artifact` holding the binary `backend` runs ('cpu': a host library; 'cuda': a cubin
    for `arch`), built where it holds none (for a GPU of another architecture, compiled
    again from the source); the same object, for the runtime to open a device on."""
    if backend == "cpu":
        if not artifact.has_host_library():
            artifact.host_library = build_host_library(artifact.source, artifact.kernels)
    elif backend == "cuda" and arch is not None and (artifact.cubin is None or artifact.cubin.arch != arch):
        artifact.cubin = build_cubin(artifact.source, arch)
    return artifact
