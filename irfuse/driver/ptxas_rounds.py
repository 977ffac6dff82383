"""`registers="ptxas"`: a plan settled on ptxas's figures of its own kernels.

The cost model estimates a kernel's registers from the words its threads hold; for kernels that
spread one element over a block (the bake-off's operators from order 4), ptxas's count and its
spills differ from any such estimate by kilobytes a thread, and plans the estimate prices alike
run up to 13x apart (benchmarks/NOTES.md, High-order elements). So: the search's plan is
compiled (NVRTC), its kernels' registers and spilled bytes added to a register table
(`planner.registers`), and the search run again with it, until the plan chosen is one whose
every kernel the table already held (its price then rests on ptxas's figures, not on the
estimate). Where that takes more than `PTXAS_ROUNDS` plans, the plan kept is the cheapest of
those compiled, each priced with its own figures (`priced_with_figures`): never one whose
kernels ptxas was not asked about. Deterministic: the same source, options and NVRTC give the
same tables, plans and code.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import replace

from irfuse.diagnostics import Diagnostic
from irfuse.dialects.element_types import element_type
from irfuse.dialects.fuse import KernelOp
from irfuse.driver.artifact import CompiledProgram, CompiledStages
from irfuse.driver.options import CompileOptions, check_ptxas_backend
from irfuse.kernel.bridge import model_from_kernel
from irfuse.planner.cost import kernel_cost, load_profile
from irfuse.planner.registers import CompiledFigures, write_register_table

# Plans compiled at most after the first before the cheapest compiled one is kept: each costs one
# NVRTC compile of the program (seconds; minutes for the bake-off's spilling kernels of orders 7-8).
PTXAS_ROUNDS = 4


def settle_on_ptxas_figures(compile_once: Callable[[CompileOptions], tuple[CompiledProgram | CompiledStages,
                                                                        list[Diagnostic]]],
                            options: CompileOptions) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic],
                                                              dict[str, CompiledFigures]]:
    """The program settled on ptxas's figures (see the module), its warnings and the table
    (signature -> `CompiledFigures`) the last search read. `compile_once(options)` compiles the
    source with a register table's path (or None) in `options.registers`
    (`driver.compile.compile_with_ptxas_figures` gives `compile_from`)."""
    check_ptxas_backend(options.backend)
    table: dict[str, CompiledFigures] = {}
    compiled = []  # (program, warnings) of every round
    with tempfile.TemporaryDirectory(prefix="irfuse-ptxas-") as tmp:
        for round_ in range(PTXAS_ROUNDS + 1):
            path = None
            if table:
                path = os.path.join(tmp, f"registers{round_}.json")
                write_register_table(path, table)
            program, warnings = compile_once(replace(options, registers=path))
            figures = program.compiled_figures()
            if all(table.get(sig) == f for sig, f in figures.items()):
                return program, warnings, table
            table.update(figures)
            compiled.append((program, warnings))
    # (the first of equal prices: the earliest round's)
    program, warnings = min(compiled, key=lambda c: priced_with_figures(c[0], options))
    return program, warnings, table


def priced_with_figures(program: CompiledProgram | CompiledStages, options: CompileOptions) -> float:
    """The plan's predicted seconds with ptxas's figures of its own kernels: each kernel's
    `predicted_ns` (the search's price, by estimate) plus what its figures change in the cost
    model (registers: the blocks an SM holds; spilled bytes: their traffic), the kernel's
    global arrays taken as the words it loads and stores an element (gathers counted as
    plain loads: the difference between the two prices is what matters), every pass of a
    staged program over `options.n` elements."""
    programs = program.stage_programs() if isinstance(program, CompiledStages) else [program]
    profile, total = load_profile(options.profile), 0.0
    itemsize = element_type(options.dtype).itemsize
    for prog in programs:
        for kernel in (op for op in prog.module.ops if isinstance(op, KernelOp)):
            r = prog.resources(kernel.sym_name.data)
            total += int(kernel.attributes["predicted_ns"].data) * 1e-9
            if r is None or not r.registers:
                continue
            model = model_from_kernel(kernel, itemsize)[0]
            sizes = [v.size for v in model.values.values() if (v.is_input or v.stored) and not v.uniform]
            total += (kernel_cost(model, options.n, profile, sizes, r.registers, r.spill_stores + r.spill_loads).time
                      - kernel_cost(model, options.n, profile, sizes).time)
    return total
