"""The single registry of irfuse passes: name, one-sentence summary, class.

`irfuse-opt --list-passes` prints it; the xDSL universe exposes it to
`xdsl-opt`; the default pipeline is built from these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.passes import ModulePass


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    factory: Callable[[], type[ModulePass]]


def _kas_dce():
    from irfuse.passes.kas_dce import KasDeadCodeElimination
    return KasDeadCodeElimination


def _fuse_each():
    from irfuse.passes.fuse_each import FuseEach
    return FuseEach


PASSES: list[PassInfo] = [
    PassInfo("kas-dce", "Removes calls and loop results that no program output depends on.", _kas_dce),
    PassInfo("fuse-each", "Lowers every kas.call to its own fuse.kernel, values passing through global memory.",
             _fuse_each),
]

# What `irfuse run` and `irfuse compile` apply when no --pipeline is given.
DEFAULT_PIPELINE = "kas-dce,fuse-each"


def pass_factories() -> dict[str, Callable[[], type[ModulePass]]]:
    return {p.name: p.factory for p in PASSES}
