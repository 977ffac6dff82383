"""A compiled program cut at its reductions over the batch (`irfuse.transforms.batch_phases`):
the phases a run over the batch in pieces takes (`irfuse.dask`), each as the text of a
program `irfuse.compile` compiles like any other."""

from __future__ import annotations

from irfuse.dialects.context import module_text
from irfuse.transforms.batch_phases import PhasePlan, split_at_reductions


def phase_plan(compiled) -> PhasePlan:
    """The phases of a compiled program (`CompiledProgram`): one, the program, where it does
    not reduce."""
    return split_at_reductions(compiled.reference_module)


def phase_texts(plan: PhasePlan) -> list[str]:
    """Each phase's program as IR text."""
    return [module_text(phase.module) for phase in plan.phases]
