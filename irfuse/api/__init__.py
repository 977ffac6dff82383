"""irfuse from Python: compile a KAS program once, call it on arrays.

    import numpy as np
    import irfuse

    prog = irfuse.compile("examples/synctest.kas")          # or KAS source text
    F, = prog(np.random.rand(1000, 3, 3).astype(np.float32))
    out = prog(A=a)                                          # by name; out.F, out["F"], out[0]
    prog(a, out=result)                                      # into an existing array
    print(prog.check(a))                                     # against the float64 reference

`compile` runs the frontend, the fusion search and the pass pipeline, and NVRTC or the
host C++ compiler (both cached on disk); the `Program` it returns is also kept in
memory, so compiling the same source with the same options again returns it at once.
"""

from __future__ import annotations

import os
import threading
import warnings

from irfuse.api.program import Outputs, Program, Verification
from irfuse.diagnostics import UsageError
from irfuse.driver.compile import PlanningOptions, compile_text
from irfuse.frontend.irgen import read_source
from irfuse.planner.cost import DEFAULT_BATCH
from irfuse.runtime.cuda_device import gpu_available

__all__ = ["compile", "Program", "Outputs", "Verification", "IrfuseWarning"]

BACKENDS = ("auto", "cuda", "cpu")


class IrfuseWarning(UserWarning):
    """A compiler warning about the program (an unused input, a statement nobody reads)."""


_programs: dict[tuple, Program] = {}
_programs_lock = threading.Lock()


def _is_source_text(source: str) -> bool:
    return "\n" in source or ";" in source


def compile(source: str | os.PathLike, *, dtype: str = "f32", backend: str = "auto",
            pipeline: str | None = None, n: int | None = None, profile: str = "h100",
            arch: str | None = None, filename: str | None = None) -> Program:
    """Compiles a KAS program to a `Program`.

    source: a path to a `.kas` file, or KAS source text (text has a `;` or a newline).
    dtype: 'f32' or 'f64', the element type of every value.
    backend: 'cuda' (the GPU, through PyCUDA), 'cpu' (the CPU backend), or 'auto' (the
        GPU when one is usable, else the CPU).
    pipeline: a pass pipeline (`irfuse-opt --list-passes`); the default pipeline's fusion
        search otherwise.
    n, profile: the batch size and device profile the fusion search plans for.
    arch: the GPU architecture to compile for (default: the GPU present, else sm_90).
    filename: the name diagnostics give source text (default '<source>').
    """
    if backend not in BACKENDS:
        raise UsageError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    if dtype not in ("f32", "f64"):
        raise UsageError(f"dtype '{dtype}' is not one of f32, f64")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _is_source_text(source)):
        path = os.fspath(source)
        text, name = read_source(path), path
    elif isinstance(source, str):
        text, name = source, filename or "<source>"
    else:
        raise UsageError(f"irfuse.compile takes a path or KAS source text, not a {type(source).__qualname__}")
    chosen = ("cuda" if gpu_available() else "cpu") if backend == "auto" else backend
    planning = PlanningOptions(n=n or DEFAULT_BATCH, profile=profile)
    key = (text, name, dtype, chosen, pipeline, planning, arch)
    with _programs_lock:
        program = _programs.get(key)
        if program is None:
            compiled, diagnostics = compile_text(text, name, pipeline, dtype, compile_gpu=chosen == "cuda",
                                                 arch=arch, planning=planning)
            program = _programs[key] = Program(compiled, chosen, diagnostics)
            for d in diagnostics:
                warnings.warn(d.render(), IrfuseWarning, stacklevel=2)
    return program
