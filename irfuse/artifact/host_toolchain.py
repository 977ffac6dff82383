"""The host C++ compiler: which one (`CXX`, else the first on PATH), how long a build may take
(`IRFUSE_CXX_TIMEOUT`), and one run of it with both checked. Shared by the CPU backend's
host libraries (`irfuse.backend.host_compile`) and the mesh's native helpers
(`irfuse.mesh.native`)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

from irfuse.diagnostics import CompileError, UsageError

TIMEOUT_VARIABLE = "IRFUSE_CXX_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0  # the largest generated programs compile in well under a minute


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


def run_compiler(cmd: list[str], cxx: list[str]) -> subprocess.CompletedProcess:
    """Runs the compiler command `cmd` (whose first words are `cxx`) within `compile_timeout`;
    a clear error where it cannot run or does not finish."""
    limit = compile_timeout()
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except OSError as e:
        raise UsageError(f"cannot run the host C++ compiler '{' '.join(cxx)}': {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise CompileError(f"the host C++ compiler '{' '.join(cxx)}' did not finish within {limit:g} s "
                           f"({TIMEOUT_VARIABLE} sets the limit)") from None
