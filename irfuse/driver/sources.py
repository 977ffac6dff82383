"""What a program is compiled from, read once.

`read_source` takes whatever `irfuse.compile` (and `irfuse.jvp`, `vjp`, `grad`, the framework
operators) accepts: a path to a `.kas` file (or to an `.mlir` file holding the IR of a
`builtin.module` with one `kas.program`, as `irfuse-opt` prints it), KAS source text (text
holding a `;` or a newline), a Python function (under `@irfuse.program` or not), or a `builtin.module` holding
one `kas.program`. Its `Source` holds the text that keys the program cache (the KAS text, or
the IR a function or module stands for) and the name diagnostics give it. A path or text is
read without the compiler (a process that runs cached programs imports none of it); a
function is traced and a module printed by it (`front`).
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import field

from irfuse.artifact.records import record
from irfuse.diagnostics import UsageError
from irfuse.frontend.source_files import read_source as read_file


def is_source_text(source: str) -> bool:
    """KAS text holds a statement's `;` or a line break; anything else is a path."""
    return "\n" in source or ";" in source


def is_module(source) -> bool:
    """Whether `source` is an xDSL module (only a process that imported xDSL can hold one)."""
    builtin = sys.modules.get("xdsl.dialects.builtin")
    return builtin is not None and isinstance(source, builtin.ModuleOp)


def python_function(source):
    """The Python function `source` is (or that `@irfuse.program` wraps), or None."""
    if type(source).__name__ == "PythonProgram":
        return getattr(source, "fn", None)
    return source if inspect.isfunction(source) else None


@record
class Source:
    """A program's source, read (see the module)."""

    text: str  # what keys the program cache: KAS text, or the IR of a function or a module
    name: str  # what diagnostics name it
    function: object | None = None  # a Python function
    given_module: bool = False  # text is the IR of a module given
    # A function's frontend result, made to find its key and kept for its first compile.
    front: object | None = field(default=None, repr=False)


def read_source(source, filename: str | None = None, who: str = "irfuse.compile") -> Source:
    """The `Source` of what `irfuse.compile` takes; UsageError for anything else (naming
    `who`, the function called)."""
    if isinstance(source, Source):
        return source
    if filename is not None and not isinstance(filename, str):
        raise UsageError(f"{who}: filename= takes the name diagnostics give source text (a string), not {filename!r}")
    function = python_function(source)
    if function is not None:
        return function_source(function)
    if is_module(source):
        return module_source(source, filename, who)
    if isinstance(source, str) and not source.strip():
        raise UsageError(f"{who}: the source is empty: give a path, KAS source text, a Python function or a kas "
                         "module")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not is_source_text(source)):
        path = os.fspath(source)
        if path.endswith(".py"):  # (read as KAS it would be refused at its first decorator's '@')
            raise UsageError(f"{who}: {path} is a Python file: compile its function itself, irfuse.compile(function) "
                             "(an @irfuse.program function, or the module's function object); a path is a KAS file "
                             "(.kas) or a kas program's IR (.mlir)")
        if isinstance(source, str) and not os.path.lexists(path) and any(c in path for c in " \t(){}=,"):
            # (a string of one line and no ';' is taken for a path; one that reads as code gets both readings)
            raise UsageError(f"{who}: there is no file {path!r}, and KAS source text holds statements ending in ';'")
        # (an `.mlir` file: the IR of a kas program, parsed and checked where it is compiled,
        # `driver.front.kas_module`; its text keys the cache as a KAS file's does)
        return Source(read_file(path), path, None, path.endswith(".mlir"))
    if isinstance(source, str):
        return Source(source, filename or "<source>")
    if type(source).__name__ in ("Program", "StagedProgram"):
        raise UsageError(f"{who} takes what it compiles (a path, KAS source text, a Python function or a kas "
                         f"module), not a compiled {type(source).__qualname__}: program {source.name} is compiled "
                         "already")
    raise UsageError(f"{who} takes a path, KAS source text, a Python function or a kas module, not a "
                     f"{type(source).__qualname__}")


def function_source(function) -> Source:
    """A Python function's `Source`: its IR as the key, its frontend result kept."""
    from irfuse.dialects.context import module_text
    from irfuse.frontend.python import compile_function

    front = compile_function(function)  # cheap: the key is the IR it gives
    # and its `@irfuse.derivative` decorators, which the driver applies after: without them a
    # decorator changed (jvp to vjp) or taken away kept the program of the one before, in the
    # process and in the disk cache
    lines = "".join(f"\n// {d.kas_line()}" for d in front.derivatives)
    return Source(module_text(front.module) + lines, f"{function.__qualname__} (Python)", function, False, front)


def module_source(module, filename: str | None, who: str) -> Source:
    """A module's `Source`: its IR text; a module that is no valid kas program, or is
    lowered already, refused."""
    from xdsl.utils.exceptions import VerifyException

    from irfuse.dialects.context import module_text
    from irfuse.dialects.kas import program_of

    try:
        name = filename or program_of(module).sym_name.data
        module.verify()
    except (ValueError, VerifyException) as e:
        raise UsageError(f"{who}: the module given is not a valid kas program: {e}") from None
    lowered = first_lowered_op(module)
    if lowered is not None:
        raise UsageError(f"{who}: the module given is already lowered (it holds {lowered.name}); {LOWERED_ADVICE}")
    return Source(module_text(module), name, None, True)


# What a module lowered already is refused with, given as an object or as an `.mlir` file.
LOWERED_ADVICE = ("compile the kas program it was lowered from (irfuse-opt prints it before any pass), or run a "
                  "plan saved by `irfuse compile -o DIR` with `irfuse run --plan DIR`")


def first_lowered_op(module):
    """The first op of the `fuse` dialect in a module (it is lowered already), or None."""
    return next((op for op in module.walk() if op.dialect_name() == "fuse"), None)
