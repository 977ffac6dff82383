"""The planner's answers for reverse mode's loops (`transforms.reverse_mode.LoopJudge`): whether
a derivative keeps its loops unrolled, and what a taped derivative costs.

Unrolled, reverse-mode code is straight code that keeps every iteration's values until the
adjoint sweep reads them; taped, each iteration's carried state goes to a history and the
adjoint loop computes the iteration again from it. Straight code is the faster form while
the planner's kernels of it hold those values in registers; past the registers a thread may
have, ptxas spills them to local memory and the unrolled kernel falls behind the taped loop
(the power iteration's gradient: 5.23 ms unrolled, 2.24 taped). So `unrolled_fits` plans the
unrolled program as a compile would (the default device profile and batch, float32: a
derivative is one program for every target) and answers whether each kernel of the best plan
needs at most the registers a thread may have (`cost.peak_register_words` against the
profile's `max_regs_per_thread`, 255). On an H200 it picks the faster form of all nine
programs measured (`benchmarks/loop_derivatives.py`, benchmarks/NOTES.md, Derivatives,
2026-11-28), where the statement count it replaces (64) picked the slower of six: among them
scalar loops of 160 and 240 statements that stay in registers (unrolled 4.2x and 6.6x
faster) and the time loop at 40 steps (160 statements, unrolled 1.29x faster once a thread
runs one element of it).

A taped loop's history is moved a row at each push and pop, so a long one costs more than
computing segments again from checkpoints; how often to split it is priced here:
`taped_price` plans a taped derivative the same way (with a smaller search, 300 configurations:
on the four most split programs tried it predicted the full search's times in a twentieth of
the time) and gives whether its kernels fit the registers and the plan's predicted time.
Against the fixed budget it replaces (a loop split once its history passed 64 words an
element), on an H200 (Derivatives, 2026-11-28) the price picks
segments of two or three iterations for a 40-step scalar loop (0.114 ms against 0.820 whole, as
the budget kept it) and the power iteration (1.753 against 2.220 split once), and is 1.21x
slower than the budget on the 40-step time loop and the 28-step rotation loop (0.827 / 0.683,
0.740 / 0.609), where the model's times of the two forms are within 3% and 27%.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from irfuse.dialects.kas import ProgramOp, program_of
from irfuse.planner.cost import DEFAULT_BATCH, peak_register_words
from irfuse.planner.profiles import load_profile
from irfuse.planner.search import plan_program
from irfuse.transforms.dead_code import eliminate_dead_code
from irfuse.transforms.node_phases import has_nodal_statements, split_at_nodal_statements
from irfuse.transforms.reverse_mode import LoopJudge

PROFILE = "h100"  # the profile a compile plans for unless told otherwise (PlanningOptions)
# Configurations the search analyses to price a taped derivative (a compile's: `search.DEFAULT_CONFIG_BUDGET`).
PRICE_BUDGET = 300


def _plans(program: ProgramOp, budget: int | None = None):
    """The best plan of each pass of `program` (not changed), as a compile plans it."""
    module = ModuleOp([program.clone()])
    eliminate_dead_code(program_of(module))
    programs = ([program_of(p.module) for p in split_at_nodal_statements(module).passes]
                if has_nodal_statements(module) else [program_of(module)])
    profile = load_profile(PROFILE)
    kw = {} if budget is None else {"budget": budget}
    return profile, [plan_program(part, DEFAULT_BATCH, profile, **kw)[1][0] for part in programs]


def _fit(profile, plans) -> bool:
    return all(peak_register_words(c.model) <= profile.max_regs_per_thread for p in plans for c in p.configs)


def unrolled_fits(program: ProgramOp) -> bool:
    """Whether every kernel the planner makes of `program` (a straight-code derivative, not
    changed) keeps its register values within a thread's registers (see the module's
    docstring). A program over a mesh is planned pass by pass, as a compile plans it."""
    return _fit(*_plans(program))


def taped_price(program: ProgramOp) -> tuple[bool, float]:
    """Whether every kernel of the planner's plan of `program` (a taped derivative) fits a
    thread's registers, and the plan's predicted time (seconds, over its passes)."""
    profile, plans = _plans(program, PRICE_BUDGET)
    return _fit(profile, plans), sum(p.predicted_time for p in plans)


LOOP_JUDGE = LoopJudge(unrolled_fits, taped_price)
