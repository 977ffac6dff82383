"""Compiler diagnostics: `file:line:col: severity: message`, the source line and a caret.

Every user-facing error of irfuse is an `IrfuseError` holding one or more
`Diagnostic`s: a `CompileError` (the program or IR is wrong or cannot be compiled),
a `UsageError` (options, arguments or files given to a tool are wrong) or an
`ExecutionError` (running compiled code failed: no GPU, a driver error). The
command-line tools print them and exit with status 1 instead of showing a Python
traceback.

`IrfuseError` is a plain `Exception`, not one of xDSL's: loading a program from the disk cache
imports nothing of xDSL (a cached load 1.0-1.5 ms shorter on the 2-core CI machine, of 17-22 ms),
and the classes are the same whatever a process imports first. `irfuse-opt` names it beside xDSL's `DiagnosticException` where it reports errors.
"""

from __future__ import annotations

import linecache
import numbers
import sys
from dataclasses import dataclass, field

@dataclass
class Diagnostic:
    message: str
    file: str | None = None  # None: not about a file (an option, the environment)
    line: int = 0
    col: int = 0
    severity: str = "error"
    source_line: str | None = None
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        if self.file is None:
            where = ""
        else:
            where = f"{self.file}:{self.line}:{self.col}: " if self.line else f"{self.file}: "
        out = [f"{where}{self.severity}: {self.message}"]
        if self.source_line is not None and self.line:
            out.append("  " + self.source_line.rstrip("\n"))
            out.append("  " + _caret_pad(self.source_line, self.col) + "^")
        out.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(out)


def is_whole(v) -> bool:
    """`v` a whole number as an argument takes one: an int or a NumPy integer, not a bool (what
    every refusal of "a whole number, not ..." tests first)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_whole(what: str, v, least: int, most: int | None = None) -> None:
    """`v` a whole number in [least, most] (no bool), else a UsageError naming `what`."""
    if not is_whole(v) or v < least or (most is not None and v > most):
        bounds = f"at least {least}" if most is None else f"from {least} to {most}"
        raise UsageError(f"{what} must be a whole number, {bounds}, not {v!r}")


def refuse_grad(what: str, value) -> None:
    """Refuses a PyTorch tensor that requires grad, as PyTorch's own `.numpy()` and
    `__cuda_array_interface__` refuse it: irfuse's calls are not recorded by autograd, so a
    gradient through one would silently be missing."""
    if type(value).__module__ == "torch" and getattr(value, "requires_grad", False):
        raise UsageError(f"{what} is a PyTorch tensor that requires grad, and irfuse's calls are not recorded by "
                         "autograd: pass its .detach() for the values alone (a program whose derivatives "
                         "autograd follows: irfuse.torch.op)")


def located(message: str, location: object, notes: list[str] | None = None) -> Diagnostic:
    """A diagnostic at an IR location: `file:line:col` and the source line when it is a
    `FileLineColLoc` (a KAS statement, or a `loc(...)` written in the IR), else about no file."""
    from xdsl.dialects.builtin import FileLineColLoc

    if isinstance(location, FileLineColLoc):
        file, line = location.filename.data, location.line.data
        return Diagnostic(message, file, line, location.column.data,
                          source_line=linecache.getline(file, line) or None, notes=list(notes or []))
    return Diagnostic(message, notes=list(notes or []))


def _caret_pad(line: str, col: int) -> str:
    # Keep tabs so the caret lines up under the column in a terminal.
    return "".join("\t" if c == "\t" else " " for c in line[: max(col - 1, 0)])


class IrfuseError(Exception):
    """One or more error diagnostics; raised instead of crashing (`irfuse-opt
    --verify-diagnostics` prints it and goes on to the next chunk)."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic | str):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(diagnostics)]
        elif isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


class CompileError(IrfuseError):
    """The program, its IR or an op library is wrong, or the generated code does not compile."""


class UsageError(IrfuseError):
    """An option, argument or file given to irfuse is wrong."""


class NotCapturable(UsageError):
    """A call issued while its stream is captured into a CUDA graph that needs what capture
    forbids (waiting for the GPU, a copy from the host, memory of its own made first)."""


class ExecutionError(IrfuseError):
    """Running compiled code failed (no GPU, a driver or launch error)."""


class SourceFile:
    """The text of one input file, for quoting lines in diagnostics."""

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text
        self.lines = text.splitlines()

    def line(self, n: int) -> str | None:
        return self.lines[n - 1] if 1 <= n <= len(self.lines) else None

    def diag(self, line: int, col: int, message: str, severity: str = "error",
             notes: list[str] | None = None) -> Diagnostic:
        return Diagnostic(message, self.name, line, col, severity, self.line(line), notes or [])


def print_diagnostics(diags: list[Diagnostic], stream=None) -> None:
    stream = stream or sys.stderr
    for d in diags:
        print(d.render(), file=stream)
