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


def _fuse_partition():
    from irfuse.passes.fuse_partition import FusePartition
    return FusePartition


def _pass(module: str, cls: str):
    def factory():
        import importlib

        return getattr(importlib.import_module(f"irfuse.passes.{module}"), cls)
    return factory


PASSES: list[PassInfo] = [
    PassInfo("kas-dce", "Removes calls and loop results that no program output depends on.", _kas_dce),
    PassInfo("fuse-each", "Lowers every kas.call to its own fuse.kernel, values passing through global memory.",
             _fuse_each),
    PassInfo("fuse-partition", "Groups calls into kernels chosen by the cost model and a CP-SAT cover.",
             _fuse_partition),
    PassInfo("fuse-remap-threads", "Runs calls needing fewer threads per element than their kernel on the "
             "block's first threads, renumbered.", _pass("fuse_remap_threads", "FuseRemapThreads")),
    PassInfo("fuse-promote-registers", "Places values in registers when all calls touching them use the same "
             "threads and compatible access patterns.", _pass("fuse_promote_registers", "FusePromoteRegisters")),
    PassInfo("fuse-linearize", "Orders each kernel's calls to minimize peak shared memory.",
             _pass("fuse_linearize", "FuseLinearize")),
    PassInfo("fuse-allocate-shared", "Assigns shared offsets; values with disjoint lifetimes share addresses, "
             "values whose accesses conflict on banks are padded.",
             _pass("fuse_allocate_shared", "FuseAllocateShared")),
    PassInfo("fuse-eliminate-barriers", "Keeps a barrier only where another thread's shared access would race.",
             _pass("fuse_eliminate_barriers", "FuseEliminateBarriers")),
    PassInfo("fuse-verify-races", "Proves a barrier separates every cross-thread shared access pair with a write.",
             _pass("fuse_verify_races", "FuseVerifyRaces")),
]

# What `irfuse run` and `irfuse compile` apply when no --pipeline is given.
DEFAULT_PIPELINE = ("kas-dce,fuse-partition,fuse-remap-threads,fuse-promote-registers,fuse-linearize,"
                    "fuse-allocate-shared,fuse-eliminate-barriers,fuse-verify-races")
UNFUSED_PIPELINE = "kas-dce,fuse-each,fuse-verify-races"


def pass_factories() -> dict[str, Callable[[], type[ModulePass]]]:
    return {p.name: p.factory for p in PASSES}
