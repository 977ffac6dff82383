"""Whether a reverse derivative may keep its loops unrolled: the planner's answer for
`loops="auto"` (`transforms.reverse_mode`).

Unrolled, reverse-mode code is straight code that keeps every iteration's values until the
adjoint sweep reads them; taped, each iteration's carried state goes to a history and the
adjoint loop computes the iteration again from it. Straight code is the faster form while
the planner's kernels of it hold those values in registers; past the registers a thread may
have, ptxas spills them to local memory and the unrolled kernel falls behind the taped loop
(the power iteration's gradient: 5.23 ms unrolled, 2.24 taped). So `unrolled_fits` plans the unrolled
program as a compile would (the default device profile and batch, float32: a derivative is
one program for every target) and answers whether each kernel of the best plan needs at
most the registers a thread may have (`cost.peak_register_words` against the profile's
`max_regs_per_thread`, 255). On an H200 it picks the faster form of all nine programs
measured (`benchmarks/loop_derivatives.py`, benchmarks/NOTES.md, forty-second session), where
the statement count it replaces (64) picked the slower of six: among them scalar loops of 160
and 240 statements that stay in registers (unrolled 4.2x and 6.6x faster) and the time loop at
40 steps (160 statements, unrolled 1.29x faster once a thread runs one element of it).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from irfuse.dialects.kas import ProgramOp, program_of
from irfuse.planner.cost import DEFAULT_BATCH, peak_register_words
from irfuse.planner.profiles import load_profile
from irfuse.planner.search import plan_program
from irfuse.transforms.dead_code import eliminate_dead_code
from irfuse.transforms.node_phases import has_nodal_statements, split_at_nodal_statements

PROFILE = "h100"  # the profile a compile plans for unless told otherwise (PlanningOptions)


def unrolled_fits(program: ProgramOp) -> bool:
    """Whether every kernel the planner makes of `program` (a straight-code derivative, not
    changed) keeps its register values within a thread's registers (see the module's
    docstring). A program over a mesh is planned pass by pass, as a compile plans it."""
    module = ModuleOp([program.clone()])
    eliminate_dead_code(program_of(module))
    programs = ([program_of(p.module) for p in split_at_nodal_statements(module).passes]
                if has_nodal_statements(module) else [program_of(module)])
    profile = load_profile(PROFILE)
    for part in programs:
        _, plans = plan_program(part, DEFAULT_BATCH, profile)
        if any(peak_register_words(c.model) > profile.max_regs_per_thread for c in plans[0].configs):
            return False
    return True
