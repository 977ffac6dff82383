"""What the passes that replace a program by one of its parts share: `kas-split-nodes` (its
passes over nodes and elements) and `kas-split-phases` (its phases at its reductions)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import program_of


def replace_by_part(op: ModuleOp, parts: list, k: int, pass_name: str, option: str, nouns: tuple[str, str]) -> None:
    """The module's program replaced by part k of `parts` (each with a `module`); a k out of
    range refused, naming the pass, its option and how many parts (`nouns`: one, several)
    the program has."""
    program = program_of(op)
    if not 0 <= k < len(parts):
        raise UsageError(f"{pass_name}: {option}={k}, but program @{program.sym_name.data} has "
                         f"{len(parts)} {nouns[len(parts) > 1]} (0 to {len(parts) - 1})")
    Rewriter.replace_op(program, program_of(parts[k].module).clone())
