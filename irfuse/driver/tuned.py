"""A tuning result of `irfuse tune` compiled again: the plan it found fastest.

The tuning names its plan by the pipeline that selects it (its rank in the search); what is
compiled must be the kernels that were timed, or the tuning is refused.
"""

from __future__ import annotations

import json
import os
import re

from irfuse.artifact.arrays import ELEMENT_TYPES, LAYOUTS
from irfuse.artifact.user_files import read_text
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
        tuning = json.loads(read_text(path))
        best = tuning["best"]
        file = file or tuning["program"]
        pipeline, dtype, groups = best["pipeline"], tuning["dtype"], best["groups"]
        layout = tuning.get("layout", "aos")  # tunings before layouts were arrays of structures
        # Tunings of earlier versions name the element type as a partition option; it is
        # the module's attribute now (set from the tuning's dtype).
        pipeline = re.sub(r" dtype=f(32|64)\b", "", pipeline)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a tuning result of 'irfuse tune': {e}") from None
    _check_fields(path, pipeline, dtype, layout, groups, best.get("blocks"))
    plan, _ = compile_program(file, pipeline, dtype, compile_gpu, arch, layout=layout)
    now = (kernel_groups(plan), kernel_blocks(plan) if "blocks" in best else None)
    then = (groups, best.get("blocks"))
    if now != then:
        raise UsageError(f"{path}: its pipeline now selects other kernels ({'; '.join(now[0])}) than the "
                           f"ones tuned ({'; '.join(then[0])}): the cost model or the op library changed "
                           "since; run 'irfuse tune' again")
    plan.meta["tuning"] = os.path.abspath(path)
    return plan


def _check_fields(path: str, pipeline, dtype, layout, groups, blocks) -> None:
    """The fields a tuning is compiled and compared by, each of the kind `irfuse tune` writes
    (a file edited or damaged since failed inside the compile or the comparison)."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    def one_of(v, names) -> bool:
        return isinstance(v, str) and v in names

    wrong = None
    if not isinstance(pipeline, str):
        wrong = "'pipeline' is not text"
    elif not one_of(dtype, ELEMENT_TYPES):
        wrong = f"'dtype' is {dtype!r}, not one of {', '.join(ELEMENT_TYPES)}"
    elif not one_of(layout, LAYOUTS):
        wrong = f"'layout' is {layout!r}, not one of {', '.join(LAYOUTS)}"
    elif not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        wrong = "'groups' is not a list of kernel groups"
    elif blocks is not None and not (isinstance(blocks, list) and all(
            isinstance(b, list) and b and all(map(whole, b)) for b in blocks)):
        wrong = "'blocks' is not a list of block shapes (whole numbers above 0)"
    if wrong:
        raise UsageError(f"{path}: not a tuning result of 'irfuse tune': {wrong}")
