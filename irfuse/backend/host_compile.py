"""The host library of generated CUDA C: the same source, built by the host C++ compiler,
cached; `irfuse.runtime.host_library` loads and runs it.

The kernel source is compiled unchanged with `IRFUSE_HOST` defined (by `irfuse_host.h`),
which selects each kernel's host function (a loop over threads per barrier-delimited
region, see `render_cpu`), together with a small generated launcher per kernel that spreads
the launch's blocks over worker threads. Optimized (-O2); no floating-point shortcuts (no
-ffast-math, no contraction into fused multiply-adds), so the results are those of the
source's operations in its order, on any x86-64 or ARM host.

The header includes `<cmath>` and C headers only (the workers are POSIX threads sharing an
atomic counter through the compiler's builtins): with the C++ thread library's headers, and
their template instances for every kernel's launcher, a build took twice as long or more
(g++ 12: cfl_step 0.9 -> 0.35 s, the 199-kernel library of every op implementation
29 -> 10 s). The header is still precompiled once per compiler and flags
(`.gch`, kept in the cache beside a copy of the header, from a cache's second library on:
making it takes about one build's time), which saves another 0.15-0.25 s a build. A
compiler that makes no precompiled header, or one that ignores it, parses the header as
before: the library is the same either way.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import tempfile
from importlib import resources

from irfuse.artifact.host_toolchain import compile_timeout, compiler, run_compiler
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.artifact.disk_cache import atomic_write, cache_lock, entry_path, read_checked, sha256, write_checked
from irfuse.diagnostics import CompileError, UsageError

HEADER = "irfuse_host.h"


def _header_text() -> str:
    return resources.files("irfuse.backend").joinpath(HEADER).read_text()


def launcher_source(kernels: list[KernelInfo]) -> str:
    """One C entry per kernel, `irf_launch_<kernel>(args, n, grid, workers, reverse)`: the
    launch's blocks spread over `workers` threads (`irf::run_blocks`); 0, or 1 where the
    kernel could not allocate its scratch."""
    lines = ['#include "kernels.cu"', ""]
    for k in kernels:
        casts = [f"(const {k.input_ctype(i)}*)a->args[{i}]" for i in range(len(k.inputs))]
        casts += [f"({k.output_ctype(i)}*)a->args[{len(k.inputs) + i}]" for i in range(len(k.outputs))]
        at = len(k.inputs) + len(k.outputs)  # (then each grouped scatter's `group_params`)
        casts += [f"({ctype})a->args[{at + i}]" for i, (ctype, _) in enumerate(k.group_params())]
        lines += [
            f"static int irf_range_{k.name}(const irf::LaunchArgs* a, long long begin, long long end) {{",
            f"  return {k.name}({', '.join(casts + ['a->n', 'begin', 'end', 'a->reverse'])});",
            "}",
            f'extern "C" int irf_launch_{k.name}(void** args, long long n, long long grid, int workers, int reverse) {{',
            "  const irf::LaunchArgs a{args, n, reverse != 0};",
            f"  return irf::run_blocks(grid, workers, irf_range_{k.name}, &a);",
            "}",
        ]
    return "\n".join(lines) + "\n"


# -fno-strict-aliasing: the 16-byte copies read real_t arrays through a vector type.
# -ffp-contract=off: a*b+c stays two roundings, as the reference and NVRTC's output are
# compared with tolerances made for that, and results must not depend on the host's ISA.
# -fno-math-errno: sqrt and the like need not set errno (their results are the same), so
# the compiler may vectorize loops that call them.
FLAGS = ["-std=c++20", "-O2", "-fno-strict-aliasing", "-ffp-contract=off", "-fno-math-errno", "-shared",
         "-fPIC", "-pthread", "-w"]
# GCC's own (benchmarks/NOTES.md, The CPU backend, 2026-11-27; the same bits in every case):
# -fvect-cost-model=dynamic: -O2 vectorizes a loop only where its trip count and its arrays'
# overlap need no test at run time (the "very-cheap" model), and the loops over a block's
# elements need both (CflStep 1.40 -> 1.18 ms on 2 cores). -mtune=native: instructions
# scheduled for the host's own core (the library is built where it runs; the instruction set
# stays the baseline's, so a library a shared cache hands to another machine still runs there):
# StVenant 16.9 -> 13.9 ms, the power iteration 623 -> 601, BigFusion 11.7 -> 12.9.
# -fpeel-loops: a loop of a few iterations inside the element (a constant trip count) unrolled
# whole, so its carried arrays stay in registers: rotation_loop.kas 25.2 -> 10.1 ms.
GCC_FLAGS = ["-fvect-cost-model=dynamic", "-mtune=native", "-fpeel-loops"]
_IS_GCC: dict[tuple[str, ...], bool] = {}


def compiler_flags(cxx: list[str]) -> list[str]:
    """The host build's flags for compiler `cxx` (GCC's own added when it is GCC: its
    `--version` names the Free Software Foundation, clang's names clang)."""
    key = tuple(cxx)
    if key not in _IS_GCC:
        try:
            out = subprocess.run([*cxx, "--version"], capture_output=True, text=True,
                                 timeout=min(compile_timeout(), 60)).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        _IS_GCC[key] = "Free Software Foundation" in out and "clang" not in out.lower()
    return FLAGS + (GCC_FLAGS if _IS_GCC[key] else [])


def abi_flag(header: str) -> str:
    """The header's version as its namespace (`IRFUSE_HOST_ABI`): libraries built from one
    header share the process's worker threads; one built from another version of it (an
    older irfuse's cached library loaded beside this one's) has pool structures of its own."""
    return f"-DIRFUSE_HOST_ABI=v{sha256(header.encode())[:16]}"


RENDERER_VARIABLE = "IRFUSE_CPU_RENDERER"
RENDERERS = {"emulate": [], "loop": ["-DIRFUSE_CPU_LOOP"]}


def cpu_renderer_flags(name: str | None = None) -> list[str]:
    """The host build's flags for a CPU rendering (by default the one `IRFUSE_CPU_RENDERER`
    asks for): "loop" (the default: kernels as loops over their elements where
    `render_cpu_loop` takes them, each kernel's CPU twin elsewhere) or "emulate" (every
    kernel's CPU twin, blocks of emulated threads: the generated CUDA run as the GPU runs it,
    barriers and shared memory included, as the tests of GPU code need)."""
    name = name or os.environ.get(RENDERER_VARIABLE, "loop") or "loop"
    if name not in RENDERERS:
        raise UsageError(f"{RENDERER_VARIABLE}={name!r}: the CPU rendering is one of "
                         f"{', '.join(map(repr, RENDERERS))}")
    return RENDERERS[name]


def build_host_library(source: str, kernels: list[KernelInfo], renderer: str | None = None) -> str:
    """The path of the host library of `source` (with a launcher per kernel of `kernels`),
    from the cache or built now (`runtime.host_library` loads it); `renderer`: see
    `cpu_renderer_flags`."""
    launcher = launcher_source(kernels)
    header = _header_text()
    cxx = compiler()
    flags = compiler_flags(cxx) + [abi_flag(header)] + cpu_renderer_flags(renderer)
    key = sha256("\0".join([source, launcher, header, *cxx, *flags]).encode())
    lib_path = entry_path("host", key, ".so")
    # Making the precompiled header takes longer than one build: a cache gets it at its
    # second library, not for a program compiled once into a fresh cache.
    seasoned = bool(glob.glob(os.path.join(os.path.dirname(os.path.dirname(lib_path)), "*", "*.so")))
    with cache_lock(lib_path):
        # A library that fails its checksum (truncated by an interrupted run, damaged) is
        # rebuilt: loading a damaged shared library can kill the process.
        if read_checked(lib_path) is None:
            precompiled = _precompiled(header, cxx, flags) if seasoned else None
            try:
                data = _build(source, launcher, header, cxx, flags, precompiled)
            except CompileError:
                if precompiled is None:
                    raise
                # The precompiled header's entry changed since this process checked it (damaged,
                # removed by a cache cleanup): forgotten, and the build parses the header itself.
                _PRECOMPILED.pop(precompiled, None)
                data = _build(source, launcher, header, cxx, flags)
            write_checked(lib_path, data)
        if read_checked(lib_path) is None:  # the cache cannot be written: a private copy
            lib_path = _private_copy(_build(source, launcher, header, cxx, flags))
    return lib_path


# The precompiled header's directory (an entry of the cache in use: its path names the cache
# and the header, compiler and flags), once checked in this process -> whether it is usable.
_PRECOMPILED: dict[str, bool] = {}


def _precompiled(header: str, cxx: list[str], flags: list[str]) -> str | None:
    """A cache directory holding the header and its precompiled form for these compiler and
    flags, built on first use; None where the compiler makes none or the cache cannot be
    written (builds then parse the header themselves)."""
    key = sha256("\0".join(["precompiled header", header, *cxx, *flags]).encode())
    where = entry_path("host-header", key)
    pch = os.path.join(where, HEADER + ".gch")
    known = _PRECOMPILED.get(where)
    if known is False:
        return None
    if known and os.path.isfile(pch) and os.path.isfile(os.path.join(where, HEADER)):
        return where  # (a file gone since the check: checked, or made, again below)
    with cache_lock(where):
        try:
            with open(os.path.join(where, HEADER)) as f:
                usable = f.read() == header
        except OSError:
            usable = False
        # (checked whole once per process: a damaged precompiled header is made again, as a
        # damaged library is)
        if not usable or read_checked(pch) is None:
            data = _build_precompiled(header, cxx, flags)
            try:
                usable = data is not None and write_checked(pch, data)
                if usable:
                    atomic_write(os.path.join(where, HEADER), header.encode())
            except OSError:
                usable = False
    _PRECOMPILED[where] = usable
    return where if usable else None


def _build_precompiled(header: str, cxx: list[str], flags: list[str]) -> bytes | None:
    """The precompiled header's bytes, or None where the compiler does not make one."""
    with tempfile.TemporaryDirectory(prefix="irfuse-host-") as tmp:
        path = os.path.join(tmp, HEADER)
        with open(path, "w") as f:
            f.write(header)
        cmd = [*cxx, *[f for f in flags if f != "-shared"], "-x", "c++-header", path, "-o", path + ".gch"]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=compile_timeout())
        except (OSError, subprocess.TimeoutExpired):
            return None
        try:
            with open(path + ".gch", "rb") as f:
                data = f.read()
        except OSError:
            return None
        return data if proc.returncode == 0 and data else None


def _private_copy(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="irfuse-host-", suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _build(source: str, launcher: str, header: str, cxx: list[str], flags: list[str],
           precompiled: str | None = None) -> bytes:
    """The shared library's bytes; `precompiled`: a directory holding the header and its
    precompiled form (`_precompiled`)."""
    with tempfile.TemporaryDirectory(prefix="irfuse-host-") as tmp:
        for name, text in (("kernels.cu", source), ("launcher.cpp", launcher), (HEADER, header)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        out = os.path.join(tmp, "kernels.so")
        cmd = [*cxx, *flags, "-include", os.path.join(precompiled or tmp, HEADER), "-x", "c++",
               os.path.join(tmp, "launcher.cpp"), "-o", out]
        proc = run_compiler(cmd, cxx)
        if proc.returncode != 0:
            err = CompileError(f"the host C++ compiler rejected the generated code:\n{proc.stderr[-4000:]}")
            err.generated = (source, proc.stderr)  # type: ignore[attr-defined]  # to map errors back
            raise err
        if not os.path.isfile(out) or not os.path.getsize(out):
            raise CompileError(f"the host C++ compiler '{' '.join(cxx)}' succeeded but wrote no library: CXX "
                               "must be a C++20 compiler such as g++ or clang++")
        # Only a library that loads is kept: one that does not (a wrapper that wrote something
        # else, a library for another machine) would fail every later run from the cache the
        # same way.
        try:
            ctypes.CDLL(out)
        except OSError as e:
            raise CompileError(f"the library built by the host C++ compiler '{' '.join(cxx)}' does not load "
                               f"({e}): CXX must be a C++20 compiler such as g++ or clang++") from None
        with open(out, "rb") as f:
            return f.read()
