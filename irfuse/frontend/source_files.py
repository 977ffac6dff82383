"""Reading a program's source file: its text, or a diagnostic naming the file (no IR here: the
program cache reads source files to key its entries without the compiler)."""

from __future__ import annotations

from irfuse.artifact.user_files import read_text
from irfuse.diagnostics import CompileError, Diagnostic


def read_source(path: str) -> str:
    """A KAS file's text; `CompileError` naming the file when it cannot be read."""
    try:
        return read_text(path)
    except UnicodeDecodeError as e:
        raise CompileError(Diagnostic(f"file is not valid UTF-8 ({e.reason} at byte {e.start})", path))
    except OSError as e:
        raise CompileError(Diagnostic(f"cannot read file: {e.strerror}", path))
