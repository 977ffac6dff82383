"""The single registry of irfuse passes: name, one-sentence summary, class; the default
pipelines; and pipeline text to passes.

`irfuse-opt --list-passes` prints it; the xDSL universe exposes it to `xdsl-opt`; the
driver builds its pipelines from it. The in-kernel part of the default pipeline is
`irfuse.transforms.in_kernel.IN_KERNEL_STEPS`, the order the planner follows too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from irfuse.diagnostics import UsageError
from irfuse.passes.fuse_allocate_shared import FuseAllocateShared
from irfuse.passes.fuse_each import FuseEach
from irfuse.passes.fuse_linearize import FuseLinearize
from irfuse.passes.fuse_load_by_readers import FuseLoadByReaders
from irfuse.passes.fuse_partition import FusePartition
from irfuse.passes.fuse_place_barriers import FusePlaceBarriers
from irfuse.passes.fuse_promote_registers import FusePromoteRegisters
from irfuse.passes.fuse_remap_threads import FuseRemapThreads
from irfuse.passes.fuse_verify_races import FuseVerifyRaces
from irfuse.passes.kas_dce import KasDeadCodeElimination
from irfuse.passes.kas_jacobian import KasJacobian
from irfuse.passes.kas_tangent_assembly import KasTangentAssembly
from irfuse.passes.kas_tangent_diagonal import KasTangentDiagonal
from irfuse.passes.kas_jvp import KasJvp
from irfuse.passes.kas_vjp import KasVjp
from irfuse.passes.kas_recompute_gathered import KasRecomputeGathered
from irfuse.passes.kas_split_nodes import KasSplitNodes
from irfuse.passes.kas_split_phases import KasSplitPhases
from irfuse.passes.test_print_analyses import (TestPrintBankWavefronts, TestPrintBatchPasses, TestPrintRaces,
                                               TestPrintSharedPeak, TestPrintStagedLoads, TestPrintUniformity)
from irfuse.transforms.in_kernel import IN_KERNEL_STEPS


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    cls: type[ModulePass]


PASSES: list[PassInfo] = [
    PassInfo("kas-dce", "Removes calls and loop results that no program output depends on.",
             KasDeadCodeElimination),
    PassInfo("fuse-each", "Lowers every kas.call to its own fuse.kernel, values passing through global memory.",
             FuseEach),
    PassInfo("fuse-partition", "Groups calls into kernels chosen by the cost model and a CP-SAT cover.",
             FusePartition),
    PassInfo("fuse-remap-threads", "Runs calls needing fewer threads per element than their kernel on the "
             "block's first threads, renumbered.", FuseRemapThreads),
    PassInfo("fuse-promote-registers", "Places values in registers when all calls touching them use the same "
             "threads and compatible access patterns.", FusePromoteRegisters),
    PassInfo("fuse-linearize", "Orders each kernel's calls to minimize peak shared memory, with a barrier "
             "after every op.", FuseLinearize),
    PassInfo("fuse-load-by-readers", "In kernels marked loads_by_readers, loads values several threads of an "
             "element read by those threads, before their reader.", FuseLoadByReaders),
    PassInfo("fuse-allocate-shared", "Assigns shared offsets; values with disjoint lifetimes share addresses, "
             "values whose accesses conflict on banks are padded.", FuseAllocateShared),
    PassInfo("fuse-place-barriers", "Replaces a kernel's barriers by one exactly before each op that would "
             "race with another thread.", FusePlaceBarriers),
    PassInfo("fuse-verify-races", "Proves a barrier separates every cross-thread shared access pair with a write.",
             FuseVerifyRaces),
    PassInfo("kas-split-phases", "Replaces the program by one of its phases at reductions over the batch (what a "
             "run over one chunk computes; irfuse.dask).", KasSplitPhases),
    PassInfo("kas-split-nodes", "Replaces a program over a mesh by one of its passes over nodes and elements "
             "(which=K; its nodal statements run per node, before or after the elements).", KasSplitNodes),
    PassInfo("kas-recompute-gathered", "Replaces each gather of a nodal statement's value that only gathers read by "
             "the statement applied to each gathered row of its operands (no pass over the nodes for it).",
             KasRecomputeGathered),
    PassInfo("kas-jvp", "Replaces each program by its forward derivative: the outputs and their tangents along "
             "the inputs wrt=...", KasJvp),
    PassInfo("kas-jacobian", "Replaces each program by its outputs and the per-element Jacobian of the output of=y "
             "by each input wrt=...", KasJacobian),
    PassInfo("kas-tangent-assembly", "Replaces a program over a mesh by the one adding its tangent's element blocks "
             "(d of / d wrt) into a sparse matrix's values through a connectivity input pairs.", KasTangentAssembly),
    PassInfo("kas-tangent-diagonal", "Replaces a program over a mesh by the one of its tangent's diagonal (d of / d "
             "wrt): its gathers, each element block's diagonal, its scatter.", KasTangentDiagonal),
    PassInfo("kas-vjp", "Replaces each program by its reverse derivative: the outputs and the cotangents of the "
             "inputs wrt=... (with of=E, the gradient of the uniform scalar output E).", KasVjp),
    PassInfo("test-print-races", "Prints the shared-memory races of each kernel (analysis test pass).",
             TestPrintRaces),
    PassInfo("test-print-bank-wavefronts", "Prints each kernel's shared-memory wavefronts per block and value "
             "(analysis test pass).", TestPrintBankWavefronts),
    PassInfo("test-print-shared-peak", "Prints each kernel's peak of live shared words and its allocation "
             "(analysis test pass).", TestPrintSharedPeak),
    PassInfo("test-print-uniformity", "Prints what each value of each program holds: per element, uniform "
             "or partials (analysis test pass).", TestPrintUniformity),
    PassInfo("test-print-batch-passes", "Prints the passes over the batch each lowered program takes when its "
             "batch runs in chunks (analysis test pass).", TestPrintBatchPasses),
    PassInfo("test-print-staged-loads", "Prints the register loads each structure-of-arrays kernel stages through "
             "shared memory in 16-byte runs on the GPU (analysis test pass).", TestPrintStagedLoads),
]

# What `irfuse run` and `irfuse compile` apply when no --pipeline is given.
DEFAULT_PIPELINE = ",".join(["kas-dce", "fuse-partition", *(s.pass_name for s in IN_KERNEL_STEPS),
                             "fuse-verify-races"])
UNFUSED_PIPELINE = "kas-dce,fuse-each,fuse-verify-races"
# Names that stand for a whole pipeline inside a pipeline text (`irfuse-opt -p irfuse-default
# -t cuda`), expanded before the text is parsed.
NAMED_PIPELINES = {"irfuse-default": DEFAULT_PIPELINE, "irfuse-unfused": UNFUSED_PIPELINE}
_NAMED = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, NAMED_PIPELINES)) + r")(?![\w{.-])")


def expand_named_pipelines(pipeline: str) -> str:
    """A pipeline text with every named pipeline (`NAMED_PIPELINES`) replaced by its passes."""
    return _NAMED.sub(lambda m: NAMED_PIPELINES[m.group(1)], pipeline)


def partition_pipeline(top: int, plan: int, max_size: int, n: int, profile: str, keep: int | None = None,
                       loops: str = "auto") -> str:
    """The default pipeline applying plan `plan` of the search's `top` best (`keep`:
    configurations kept per group, the pass's default when None; `loops`: where loops may
    run, see fuse-partition), every option explicit."""
    kept = "" if keep is None else f" keep={keep}"
    where = "" if loops == "auto" else f" loops={loops}"
    part = f"fuse-partition{{max-size={max_size} top={top}{kept} plan={plan} n={n} profile={profile}{where}}}"
    return DEFAULT_PIPELINE.replace("fuse-partition", part, 1)


def pass_classes() -> dict[str, type[ModulePass]]:
    return {p.name: p.cls for p in PASSES}


def strip_module_anchor(spec: str) -> str:
    """`builtin.module(a,b)` -> `a,b`; plain lists pass through."""
    spec = spec.strip()
    for anchor in ("builtin.module(", "any("):
        if spec.startswith(anchor) and spec.endswith(")"):
            return spec[len(anchor):-1]
    return spec


def build_passes(pipeline: str, defaults: Mapping[str, Mapping[str, object]] | None = None) -> list[ModulePass]:
    """The passes of a pipeline text (`a,b{opt=1}` or `builtin.module(...)`). `defaults` gives,
    per pass name, option values used where the text does not set that option."""
    try:
        specs = list(parse_pipeline(expand_named_pipelines(strip_module_anchor(pipeline))))
    except (Exception, ArgSpecParseError) as e:  # noqa: BLE001 -- xDSL's spec parser raises several kinds
        raise UsageError(f"bad pipeline '{pipeline}': {e}") from None
    classes = pass_classes()
    unknown = [p.name for p in specs if p.name not in classes]
    if unknown:
        raise UsageError(f"bad pipeline '{pipeline}': unknown passes {unknown} (see irfuse-opt --list-passes)")
    passes = []
    for spec in specs:
        for option, value in (defaults or {}).get(spec.name, {}).items():
            if option.replace("_", "-") not in spec.parameters and option not in spec.parameters:
                spec.parameters[option.replace("_", "-")] = (value,)
        try:
            passes.append(classes[spec.name].from_spec(spec))
        except Exception as e:  # noqa: BLE001 -- option parsing raises several kinds
            raise UsageError(f"bad pipeline '{pipeline}': {e}") from None
    return passes
