"""A tuning result of `irfuse tune` compiled again: the plan it found fastest.

The tuning names its plan by the pipeline that selects it (its rank in the search); what is
compiled must be the kernels that were timed, or the tuning is refused.
"""

from __future__ import annotations

import json
import os
import re

from irfuse.diagnostics import UsageError
from irfuse.driver.artifact import CompiledProgram
from irfuse.driver.compile import compile_program


def kernel_groups(plan: CompiledProgram) -> list[str]:
    return [op.attributes["group"].data for op in plan.module.ops if op.name == "fuse.kernel"]


def kernel_blocks(plan: CompiledProgram) -> list[list[int]]:
    return [[k.bx, k.by] + ([k.per_thread] if k.per_thread != 1 else []) for k in plan.kernels]


def compile_tuned(path: str, file: str | None = None, arch: str | None = None,
                  compile_gpu: bool = True) -> CompiledProgram:
    """The fastest plan of a tuning result, compiled again from its program and pipeline.

    The pipeline names the plan by its rank in the search; a cost model or library that
    changed since the tuning can rank another plan there, so the kernels compiled must be
    the ones that were timed (their groups and block shapes), or the tuning is refused."""
    try:
        with open(path) as f:
            tuning = json.load(f)
        best = tuning["best"]
        file = file or tuning["program"]
        pipeline, dtype, groups = best["pipeline"], tuning["dtype"], best["groups"]
        layout = tuning.get("layout", "aos")  # tunings before layouts were arrays of structures
        # Tunings of earlier versions name the element type as a partition option; it is
        # the module's attribute now (set from the tuning's dtype).
        pipeline = re.sub(r" dtype=f(32|64)\b", "", pipeline)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a tuning result of 'irfuse tune': {e}") from None
    plan, _ = compile_program(file, pipeline, dtype, compile_gpu, arch, layout=layout)
    now = (kernel_groups(plan), kernel_blocks(plan) if "blocks" in best else None)
    then = (groups, best.get("blocks"))
    if now != then:
        raise UsageError(f"{path}: its pipeline now selects other kernels ({'; '.join(now[0])}) than the "
                           f"ones tuned ({'; '.join(then[0])}): the cost model or the op library changed "
                           "since; run 'irfuse tune' again")
    plan.meta["tuning"] = os.path.abspath(path)
    return plan
