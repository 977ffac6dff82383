"""The host C++ compiler: which one (`CXX`, else the first on PATH), how long a build may take
(`IRFUSE_CXX_TIMEOUT`) and how much memory (`IRFUSE_CXX_MEMORY`), and one run of it with
these checked. Shared by the CPU backend's
host libraries (`irfuse.backend.host_compile`) and the mesh's native helpers
(`irfuse.mesh.native`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

from irfuse.diagnostics import CompileError, UsageError

TIMEOUT_VARIABLE = "IRFUSE_CXX_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0  # the largest generated programs compile in well under a minute
MEMORY_VARIABLE = "IRFUSE_CXX_MEMORY"
# A C++ compiler's time and memory grow faster than the code: a kernel carrying values of
# several hundred words through a loop took GCC 12 past 9 GB (benchmarks/NOTES.md, Robustness
# runs, 2026-11-29). Its address space is capped (on Linux, by the shell's `ulimit -v`) at half
# the machine's memory unless `IRFUSE_CXX_MEMORY` (bytes) says otherwise, so such a compile ends
# with an error that says so instead of taking the machine's memory.
MEMORY_FLOOR = 2 << 30


def compile_timeout() -> float:
    """Seconds a host compile may take: `IRFUSE_CXX_TIMEOUT`, else `DEFAULT_TIMEOUT_S`."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{TIMEOUT_VARIABLE} must be a positive number of seconds, not '{text}'")
    return value


def compiler() -> list[str]:
    """The host C++ compiler's command words: `CXX` split as a shell would (`ccache g++`), else
    the first of g++, c++, clang++ on PATH; a clear error when there is none."""
    given = os.environ.get("CXX", "").strip()
    if given:
        try:
            words = shlex.split(given)
        except ValueError as e:
            raise UsageError(f"CXX='{given}' does not parse as a command: {e}") from None
        if shutil.which(words[0]) is None:
            raise UsageError(f"CXX='{given}': '{words[0]}' is not an executable (not found on PATH); set CXX to a "
                             "C++20 compiler such as g++ or clang++, or unset it")
        return words
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise CompileError("CPU execution needs a C++20 compiler (g++ or clang++); none was found on PATH")
    return [cxx]


def compile_memory() -> int:
    """Bytes of address space a host compile may take: `IRFUSE_CXX_MEMORY`, else half the
    machine's memory (at least `MEMORY_FLOOR`)."""
    text = os.environ.get(MEMORY_VARIABLE, "").strip()
    if not text:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total = 0
        return max(MEMORY_FLOOR, total // 2)
    if not text.isdigit() or int(text) < 1 << 20:
        raise UsageError(f"{MEMORY_VARIABLE} must be a whole number of bytes, at least 1 MiB, not '{text}'")
    return int(text)


def run_compiler(cmd: list[str], cxx: list[str]) -> subprocess.CompletedProcess:
    """Runs the compiler command `cmd` (whose first words are `cxx`) within `compile_timeout`
    and, on Linux, `compile_memory`; a clear error where it cannot run, does not finish or
    runs out of that memory."""
    limit, memory = compile_timeout(), compile_memory()
    capped = sys.platform.startswith("linux") and os.path.exists("/bin/sh")
    # (`ulimit -v` in KiB, set in a shell that then runs the compiler: no code of ours between
    # fork and exec)
    run = ["/bin/sh", "-c", f'ulimit -v {memory >> 10} 2>/dev/null; exec "$@"', "sh", *cmd] if capped else cmd
    try:
        proc = subprocess.run(run, capture_output=True, text=True, timeout=limit)
    except OSError as e:
        raise UsageError(f"cannot run the host C++ compiler '{' '.join(cxx)}': {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise CompileError(f"the host C++ compiler '{' '.join(cxx)}' did not finish within {limit:g} s "
                           f"({TIMEOUT_VARIABLE} sets the limit)") from None
    if capped and proc.returncode != 0 and re.search(r"out of memory|virtual memory exhausted|std::bad_alloc|"
                                                     r"cannot allocate memory", proc.stderr, re.I):
        raise CompileError(f"the host C++ compiler '{' '.join(cxx)}' ran out of the {memory / (1 << 30):.1f} GiB "
                           f"it may take ({MEMORY_VARIABLE} sets the limit, in bytes): the generated code is too "
                           "large for it (values of several hundred words carried through a loop are; "
                           f"the compiler said: {proc.stderr.strip()[-300:]})")
    return proc
