"""Compiling a program to a `CompiledProgram`: frontend, pass pipeline, CUDA C, cubin; a
program over a mesh that works per node to `CompiledStages`, one compiled program a stage.
`compile_from` is the entry the library interface and the tools take (a `front.Source` and
`options.CompileOptions`); `compile_program` (a path), `compile_text` and `compile_frontend`
are the same road from further along.

Compilation is a pure function of its inputs: the source, the options below and the
installed irfuse (with its op libraries). The element type and the global arrays' layout
are written into the IR as the module attributes `kas.element_type` and `kas.layout`; the batch size and device profile the cost
model plans for reach `fuse-partition` as its options; register counts of earlier
compiles are used only when a register table is named. The disk cache only saves time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from irfuse.artifact.records import record
from irfuse.kernel.policies import default_min_blocks
from irfuse.backend.cuda_emit import EmittedModule, emit_module, with_min_blocks
from irfuse.backend.render_cpu_loop import cpu_loop_kernel
from irfuse.backend.compilers import compiler_for
from irfuse.diagnostics import Diagnostic
from irfuse.dialects.context import make_context
from irfuse.dialects.element_types import element_type, module_element_type, set_module_element_type
from irfuse.dialects.layouts import set_module_layout, set_module_strides
from irfuse.artifact.stages import Stage
from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import program_of
from irfuse.artifact.artifact import Artifact, CubinResult
from irfuse.driver.artifact import CompiledProgram, CompiledStages
from irfuse.driver.fused_stages import fused_plan, sums_fusions
from irfuse.dialects.fuse import KernelOp
from irfuse.transforms.recompute_gathered import recompute_where_gathered
from irfuse.driver.front import frontend, with_derivatives
from irfuse.driver.sources import Source, read_source
from irfuse.driver.library import default_library  # (also installs the implementation check)
from irfuse.driver.options import PTXAS, CompileOptions
from irfuse.driver.ptxas_rounds import settle_on_ptxas_figures
from irfuse.driver.reader_loads import with_loads_by_readers
from irfuse.frontend.irgen import FrontendResult
from irfuse.transforms.constant_inputs import fix_inputs
from irfuse.transforms.node_phases import has_nodal_statements, split_at_nodal_statements
from irfuse.passes.registry import DEFAULT_PIPELINE, build_passes, expand_named_pipelines
from irfuse.planner.cost import DEFAULT_BATCH, NODES_PER_ELEMENT, load_profile


@record(frozen=True)
class PlanningOptions:
    """What the fusion search plans for; given to `fuse-partition` wherever the pipeline
    names it without setting these options itself."""

    n: int = DEFAULT_BATCH
    profile: str = "h100"
    registers: str | None = None  # a register table written by `irfuse compile`

    def partition_defaults(self) -> dict[str, dict[str, object]]:
        opts: dict[str, object] = {"n": self.n, "profile": self.profile}
        if self.registers:
            opts["registers"] = self.registers
        return {"fuse-partition": opts}


def run_pipeline(module: ModuleOp, pipeline: str, planning: PlanningOptions | None = None) -> ModuleOp:
    """Applies a pass pipeline to a module and verifies the result."""
    passes = build_passes(pipeline, (planning or PlanningOptions()).partition_defaults())
    PassPipeline(tuple(passes)).apply(make_context(), module)
    module.verify()
    return module


def lower(module: ModuleOp, pipeline: str | None = None, planning: PlanningOptions | None = None) -> ModuleOp:
    return run_pipeline(module, pipeline or DEFAULT_PIPELINE, planning)


def build(module: ModuleOp, compile_gpu: bool = True, arch: str | None = None,
          sums_kernels: Sequence = (), width: int | None = None, cores=None) -> CompiledProgram:
    """Emits CUDA C for an already-lowered module (in its element type) and, with
    `compile_gpu`, compiles it with NVRTC.

    NVRTC compiles the module's units apart (`EmittedModule.units`): each planned kernel with
    the device functions it calls, and the library's kernels (found in NVRTC's cache where an
    earlier program had the same); the program's cubin holds their images (`CubinResult.images`).
    A kernel that ptxas makes spill (more than `SPILL_BYTES_KEPT`) is compiled again alone,
    asking for fewer resident blocks (more registers per thread) until it does not, or one block
    is asked: first 1024 threads per SM where more were asked (`launch_min_blocks`), then half as
    many (`_fewer_blocks`); the module is emitted once, a step changing only its launch bounds
    (`with_min_blocks`). A kernel the planner's count of registers puts far past a step's
    (`_first_steps`) starts at the first step it does not. Where cores are idle (`_width`, or
    `width` given: the compiles this build may run at once), compiles run side by side, each in
    a thread (NVRTC releases the GIL): every unit's first compile beside each planned kernel's
    first `width` - 1 steps (which a spilling kernel needs next, so it does not wait for the
    first to find the spill), and each later round the next steps of every kernel still
    spilling. Each kernel keeps its first step that does not spill, whatever ran beside what:
    the kept source, kernels and cubin do not depend on the cores (tests/test_planner.py checks
    1, 2 and 4 at once). `cores` (a semaphore): the cores this build shares with the modules
    built beside it (`_build_modules`); each compile takes one, so that its units run on the
    cores the others leave, however many steps `width` asks for."""
    element = module_element_type(module)
    emitted = emit_module(module, element, {}, cpu_loop=cpu_loop_kernel, sums_kernels=sums_kernels)
    if not compile_gpu:
        return CompiledProgram(module, element.name, emitted.source, emitted.kernels, None)
    width = _width() if width is None else width
    first = _first_steps(module, element.itemsize, emitted)
    stepped = [u for u in emitted.units if len(u.kernels) == 1]  # (the planned kernels, a library's one)
    unit_of = {u.kernels[0].name: u for u in stepped}
    ladders = {}  # kernel -> the resident blocks it is compiled at, in turn
    for name, unit in unit_of.items():
        start = first.get(name, unit.kernels[0].min_blocks)
        ladders[name] = [start] + [b for b in _steps_down(unit.kernels[0], element.itemsize) if b < start]
    compiled: dict[tuple[str, int], CubinResult] = {}  # (kernel, resident blocks) -> its unit's cubin there

    def steps_of(name: str, count: int) -> list:
        """The next `count` steps of kernel `name` not yet compiled, from the first."""
        return [(name, b) for b in ladders[name] if (name, b) not in compiled][:count]

    def jobs(steps: list) -> list:
        """Each step (kernel, resident blocks) as its kernel's unit and those blocks."""
        return [(unit_of[name], {name: b}) for name, b in steps]

    # (first round: every unit at its first step, the library's beside them, then each planned
    # kernel's next steps as cores allow: queued in that order)
    firsts = [(name, ladders[name][0]) for name in ladders]
    ahead = [s for name in ladders for s in steps_of(name, width)[1:]]
    others = [u for u in emitted.units if u not in stepped]
    done = _compile_units(jobs(firsts) + [(u, {}) for u in others] + jobs(ahead), element, arch, width, cores)
    kept_others = done[len(firsts):len(firsts) + len(others)]
    del done[len(firsts):len(firsts) + len(others)]
    compiled.update(zip(firsts + ahead, done))
    while True:
        at = {}
        unknown = []
        for name, ladder in ladders.items():
            for b in ladder:
                if (name, b) not in compiled:
                    unknown.append(name)
                    break
                if not _spills(compiled[(name, b)], unit_of[name].kernels[0], b) or b == ladder[-1]:
                    at[name] = b
                    break
        if not unknown:
            break
        steps = [s for name in unknown for s in steps_of(name, max(1, width // len(unknown)))]
        compiled.update(zip(steps, _compile_units(jobs(steps), element, arch, width, cores)))
    kept = with_min_blocks(emitted, at)
    images = [(compiled[(name, b)], (name,)) for name, b in at.items()] + [
        (c, tuple(k.name for k in u.kernels)) for u, c in zip(others, kept_others)]
    return CompiledProgram(module, element.name, kept.source, kept.kernels, CubinResult.joined(images))


WIDTH = 4  # steps compiled side by side where cores are idle (see `_width`)


# A kernel's registers as the planner counts them (`cost.peak_register_words`: its values at
# their peak, not capped) past this many times what a step's launch bounds leave a thread
# (an SM's 65,536 registers over its resident threads, at most 255): ptxas spilled at every such
# step of the examples, mesh and high-order examples and random programs (hex8 in float64: 440
# counted, 1,872 bytes spilled at 64 registers and 368 at 128; BP3: 186 counted, 1.9-3 KB
# spilled at 54 and 68), and those under it did not always (Transform44 in float64: 140 counted,
# none spilled at 64; J2's Jacobian: 276 counted, 16 bytes at 128). benchmarks/NOTES.md,
# Compiling, 2026-12-01 (the first step of a kernel sure to spill).
SURE_SPILL = 2.5


def _first_steps(module: ModuleOp, itemsize: int, emitted: EmittedModule) -> dict[str, int]:
    """The resident blocks each planned kernel is first compiled at: its launch bounds' own,
    or its first step to fewer blocks (`_fewer_blocks`) whose registers are not passed more
    than `SURE_SPILL` times by the planner's count, so that a kernel sure to spill is not
    compiled at the steps it would spill at (one compile, or one round of them, fewer: hex8 in
    float64 and BP3 are compiled at two steps instead of four)."""
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.planner.cost import peak_register_words
    from irfuse.planner.profiles import H100  # (its registers an SM and a thread: every sm_70 and later GPU's)

    planned = {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}
    first = {}
    for k in emitted.kernels:
        if k.name not in planned:
            continue
        need = peak_register_words(model_from_kernel(planned[k.name], itemsize)[0])
        ladder = [k.min_blocks] + _steps_down(k, itemsize)
        first[k.name] = next((b for b in ladder if need <= SURE_SPILL * min(
            H100.max_regs_per_thread, H100.regs_per_sm // (b * k.threads))), ladder[-1])
    return first


def _width() -> int:
    """Steps to compile side by side: `WIDTH` where the machine has a core idle (`_busy_cores`,
    this compile's own core included, half a core or more below its cores), else one.
    Compiling a step that turns out not to be needed costs a core's time: on a busy machine
    (the test suite's workers on every core: 415-428 s against 382-402 s with two always) it
    only slows the rest. The result is the same either way."""
    cores = os.cpu_count() or 1
    return max(1, min(WIDTH, cores, 1 + int(cores - _busy_cores() + 0.5)))


RUNNABLE_READS = 5  # (`_busy_cores`: 5 ms of a compile)


def _busy_cores(loadavg: str = "/proc/loadavg") -> float:
    """Cores busy now, this compile's own included: the threads Linux has runnable at this
    instant (`loadavg`'s fourth field, `runnable/all`, the reading thread one of them; the
    fewest of `RUNNABLE_READS` reads a millisecond apart, since a thread runnable for a moment
    is not a busy core), else the one-minute load average, else every core. The average lags:
    for a minute after other work (a program compiled just before, both cores of a 2-core
    machine busy for a second) it counts cores that are idle now, and a spilling kernel's steps
    were then compiled one after the other: BP3's example 2.5 s cold against 1.4 side by side
    (benchmarks/NOTES.md, Compiling, 2026-12-06)."""
    try:
        counts = []
        for _ in range(RUNNABLE_READS):
            with open(loadavg) as f:
                counts.append(float(f.read().split()[3].split("/")[0]))
            time.sleep(0.001)
        return min(counts)
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except OSError:  # (no load average on this system)
        return float(os.cpu_count() or 1)


def _shared_blocks(info, itemsize: int) -> int:
    """The most blocks of a kernel an SM holds by its shared memory and threads (the cost model's
    `resident_blocks` on the H100 profile, whose shared memory is sm_90's, the most of any)."""
    from irfuse.planner.cost import resident_blocks
    from irfuse.planner.profiles import H100

    return resident_blocks(H100, info.threads, info.total_shared_bytes(itemsize), 1)


def _steps_down(info, itemsize: int) -> list[int]:
    """A compiled kernel's steps to fewer resident blocks (`_fewer_blocks`): one at a time for a
    kernel spreading an element over several threads."""
    return _fewer_blocks(info.min_blocks, info.threads, _shared_blocks(info, itemsize), info.bx > 1)


def _fewer_blocks(blocks: int, threads: int, most: int | None = None, by_one: bool = False) -> list[int]:
    """The resident blocks a spilling kernel is asked for next, in turn, down to one: 1024
    threads an SM where more were asked, then half as many each time. Where its shared memory
    holds `most` blocks an SM, between a step and the next, `most` comes between them (more
    registers squeezed for blocks that cannot be resident buy nothing: J2's consistent tangent,
    41.5 KB a block of 128, spilled at eight and ran unspilled at five, 96 registers, where the
    step after eight is four).

    With `by_one` (a kernel spreading an element over several threads: a few large blocks an
    SM), one block fewer each time from 1024 threads an SM or the blocks asked: halving two or
    five blocks of 196 threads to one or two leaves an SM 6-12 warps, where a block more is a
    third to a half more. BP1 at order 5 in float64 spilled 56 bytes a thread at five blocks and
    was stepped to two (116 registers); at four it spills 32 (72 registers), which a kernel
    keeps (`SPILL_BYTES_KEPT`): twice the warps (benchmarks/NOTES.md, High-order elements)."""
    if by_one:
        return list(range(min(blocks - 1, default_min_blocks(threads)), 0, -1))
    out = []
    base = default_min_blocks(threads)
    while blocks > 1:
        step = base
        while step >= blocks and step > 1:
            step //= 2
        nxt = base if blocks > base else step
        blocks = most if most is not None and nxt < most < blocks else nxt
        out.append(blocks)
    return out


# Spilled bytes (stores and loads together, a thread) a kernel keeps its resident blocks for:
# a few words spilled go through the L1 cache, and halving the resident blocks for them costs
# more. Measured on an H200 (benchmarks/NOTES.md): the J2 return's consistent tangent spills 8
# bytes at 4 blocks of 128 threads (128 registers) and none at 2 (159): 0.596 against 0.694 ms
# for 4 M elements (Compiling, 2026-11-29); hex8 under the h200 profile spills 24 bytes at 2
# blocks of 256 threads and none at 1: 0.779 against 1.082 ms (The planner, 2026-12-01).
SPILL_BYTES_KEPT = 32


def _spills(cubin, kernel, blocks: int) -> bool:
    """Whether ptxas made `kernel`, compiled at `blocks` resident blocks, spill more than
    `SPILL_BYTES_KEPT` where a step to fewer blocks is left."""
    r = cubin.resources.get(kernel.name)
    return r is not None and r.spill_stores + r.spill_loads > SPILL_BYTES_KEPT and blocks > 1


def _compile_units(jobs: list[tuple], element, arch: str | None, width: int, cores=None) -> list[CubinResult]:
    """The cubin of each of `jobs` (a unit, its kernels' resident blocks), compiled `width` at a
    time, each in a thread (one: in this one); with `cores` (a semaphore shared with the modules
    built beside this one), each compile in a thread of its own once it holds a core."""
    from concurrent.futures import ThreadPoolExecutor

    nvrtc = compiler_for("cuda")
    units = [with_min_blocks(unit, blocks) for unit, blocks in jobs]

    def compiled(u):
        if cores is None:
            return nvrtc.compile(u.source, u.kernels, element, arch)
        with cores:
            return nvrtc.compile(u.source, u.kernels, element, arch)
    threads = len(units) if cores is not None else min(width, len(units))
    if threads <= 1:
        return [compiled(u) for u in units]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [future.result() for future in [pool.submit(compiled, u) for u in units]]


def compile_program(path: str, pipeline: str | None = None, dtype: str = "f32", compile_gpu: bool = True,
                    arch: str | None = None, planning: PlanningOptions | None = None, layout: str = "aos",
                    constants: tuple = ()) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic]]:
    """A KAS file compiled with a pipeline (the default one when None) for an element type
    and a layout of the global arrays (`irfuse.dialects.layouts`), its uniform inputs named in
    `constants` fixed (`CompileOptions.constants`): `compile_from`."""
    return compile_from(read_source(path), _options(pipeline, dtype, compile_gpu, arch, planning, layout, constants))


def compile_text(text: str, filename: str, pipeline: str | None = None, dtype: str = "f32",
                 compile_gpu: bool = True, arch: str | None = None, planning: PlanningOptions | None = None,
                 layout: str = "aos", strides: dict[str, tuple[int, ...]] | None = None
                 ) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic]]:
    """KAS source text (diagnostics name it `filename`) compiled as `compile_program` does."""
    return compile_from(Source(text, filename), _options(pipeline, dtype, compile_gpu, arch, planning, layout),
                        strides=strides)


def _options(pipeline: str | None, dtype: str, compile_gpu: bool, arch: str | None,
             planning: PlanningOptions | None, layout: str, constants: tuple = ()) -> CompileOptions:
    planning = planning or PlanningOptions()
    return CompileOptions(dtype, "cuda" if compile_gpu else "cpu", pipeline, planning.n, planning.profile, arch,
                          layout, planning.registers, constants)


def compile_from(source: Source, options: CompileOptions, layout: str | None = None,
                 strides: dict[str, tuple[int, ...]] | None = None
                 ) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic]]:
    """The one way from a source to what runs it (`irfuse.compile`, the tools, the tests): its
    module (`front.frontend`: derivative lines applied), compiled with `options` for `layout`
    (by default the options') and the strided views `strides` (`compile_frontend`);
    `registers="ptxas"` plans with ptxas's own figures (`compile_with_ptxas_figures`)."""
    if options.registers == PTXAS:
        program, warnings, _ = compile_with_ptxas_figures(source, options, layout, strides)
        return program, warnings
    planning = PlanningOptions(n=options.n, profile=options.profile, registers=options.registers)
    name = source.function.__name__ if source.function is not None else os.path.basename(source.name)  # type: ignore
    return compile_frontend(frontend(source), name, options.pipeline, options.dtype, options.backend == "cuda",
                            options.arch, planning, layout or options.layout, strides, options.constants)


def compile_with_ptxas_figures(source: Source, options: CompileOptions, layout: str | None = None,
                               strides: dict[str, tuple[int, ...]] | None = None
                               ) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic], dict]:
    """`registers="ptxas"`: the source compiled on ptxas's figures of its plan's own kernels
    (`ptxas_rounds.settle_on_ptxas_figures`); the program, its warnings and the register table."""
    return settle_on_ptxas_figures(lambda o: compile_from(source, o, layout, strides), options)


def compile_frontend(result: FrontendResult, name: str, pipeline: str | None = None, dtype: str = "f32",
                     compile_gpu: bool = True, arch: str | None = None, planning: PlanningOptions | None = None,
                     layout: str = "aos", strides: dict[str, tuple[int, ...]] | None = None,
                     constants: tuple = ()) -> tuple[CompiledProgram | CompiledStages, list[Diagnostic]]:
    """A frontend's module (KAS text or a Python function) compiled as `compile_program` does,
    its `derivative` lines applied first; `strides`: program inputs and outputs that are
    strided views (`dialects.layouts`). A program over a mesh that works per node compiles
    into stages (`compile_stages`)."""
    result = with_derivatives(result)
    fix_inputs(program_of(result.module), constants)  # (uniform inputs fixed when compiling: `constants=`)
    if has_nodal_statements(result.module):
        if layout != "aos" or strides:
            raise UsageError(f"program {name} runs over a mesh on arrays of structures only")
        return compile_stages(result.module, name, pipeline, dtype, compile_gpu, arch, planning), result.warnings
    return _compile_module(result, name, pipeline, dtype, compile_gpu, arch, planning, layout, strides)


def compile_stages(module: ModuleOp, name: str, pipeline: str | None = None, dtype: str = "f32",
                   compile_gpu: bool = True, arch: str | None = None, planning: PlanningOptions | None = None
                   ) -> CompiledStages:
    """A program over a mesh that works per node, as its passes over nodes and elements
    (`transforms.node_phases`), each compiled as a program of its own. Where nodal statements
    before the gathers can be recomputed where gathered (`transforms.recompute_gathered`), the
    program is planned both ways and the one the cost model prices lower is kept
    (`_cheaper`); without nodal statements left, it is one program over the mesh."""
    planned = _planned_passes(module, pipeline, dtype, planning)
    again = recompute_where_gathered(module, default_library())
    if again is not None:
        recomputed = _planned_passes(again, pipeline, dtype, planning)
        if _cheaper(recomputed, planned, planning):
            if recomputed[0] is None:  # (no nodal statement left: one program over the mesh, planned)
                (reference, lowered_module), = recomputed[1]
                return _build_module(reference, lowered_module, name, pipeline, compile_gpu, arch)
            module, planned = again, recomputed
    plan, lowered = planned
    fusions = sums_fusions([s.over for s in plan.passes], [s.inputs for s in plan.passes], [m for _, m in lowered],
                           tuple(program_of(module).outputs))
    jobs = []
    for k, (step, (reference, lowered_module)) in enumerate(zip(plan.passes, lowered)):
        label = f"{name}, pass over {step.over} ({program_of(step.module).sym_name.data})"
        fusion = fusions.get(k)
        sums = [(fusion.kernel, fusion.sums, fusion.name)] if fusion is not None else ()
        jobs.append((reference, lowered_module, label, sums))
    stages = [Stage(step.over, step.inputs, step.outputs, compiled)
              for step, compiled in zip(plan.passes, _build_modules(jobs, pipeline, compile_gpu, arch))]
    fused = _fused_stages(stages, fusions) if fusions else None
    return CompiledStages(module.clone(), stages, {"source": name, "pipeline": pipeline or DEFAULT_PIPELINE}, fused)


def _planned_passes(module: ModuleOp, pipeline: str | None, dtype: str, planning: PlanningOptions | None) -> tuple:
    """(`NodePlan`, each pass's (reference, lowered module)) of a program over a mesh: its
    passes planned; a program without nodal statements, one pass over the elements."""
    if not has_nodal_statements(module):
        return None, [_lower_module(FrontendResult(module.clone()), pipeline, dtype, planning, "aos", None)]
    plan = split_at_nodal_statements(module)
    return plan, [_lower_module(FrontendResult(step.module.clone()), pipeline, dtype, planning, "aos", None)
                  for step in plan.passes]


def _cheaper(one: tuple, other: tuple, planning: PlanningOptions | None) -> bool:
    """Whether planned passes `one` cost less than `other` by the cost model: each planned
    kernel's predicted time, a pass over the nodes' for the nodes a mesh of the model has per
    element (`cost.NODES_PER_ELEMENT`: its kernels planned for as many nodes as elements)."""
    profile = load_profile((planning or PlanningOptions()).profile)

    def seconds(passes: tuple) -> float:
        plan, lowered = passes
        overs = [s.over for s in plan.passes] if plan is not None else ["elements"]
        total = 0.0
        for over, (_, module) in zip(overs, lowered):
            for op in module.walk():
                if isinstance(op, KernelOp) and op.predicted_ns is not None:
                    t = op.predicted_ns.data * 1e-9
                    total += t if over == "elements" else \
                        profile.launch_overhead + (t - profile.launch_overhead) * NODES_PER_ELEMENT
        return total
    return seconds(one) < seconds(other)


def _fused_stages(stages: list[Stage], fusions: dict) -> list[Stage]:
    """The stages with each fused pair one stage (`driver.fused_stages`): the elements stage's
    source, kernels and binary with the fused host plan."""
    out: list[Stage] = []
    k = 0
    while k < len(stages):
        fusion = fusions.get(k)
        if fusion is None:
            out.append(stages[k])
            k += 1
            continue
        elements, nodes = stages[k], stages[k + 1]
        e = elements.artifact
        plan = fused_plan(e.host, nodes.artifact.host, fusion)
        artifact = Artifact(e.dtype, e.layout, e.source, e.kernels, plan, e.cubin, dict(e.meta))
        out.append(Stage("elements", plan.input_names, plan.output_names, artifact))
        k += 2
    return out


def _lower_module(result: FrontendResult, pipeline: str | None, dtype: str, planning: PlanningOptions | None,
                  layout: str, strides: dict[str, tuple[int, ...]] | None) -> tuple[ModuleOp, ModuleOp]:
    """A program's module with its element type and layout set (the reference), and lowered."""
    set_module_element_type(result.module, element_type(dtype))
    _check_numbers_fit(result.module, dtype)
    set_module_layout(result.module, layout)
    set_module_strides(result.module, strides or {})
    reference = result.module.clone()
    return reference, lower(result.module, pipeline, planning)


def _check_numbers_fit(module: ModuleOp, dtype: str) -> None:
    """The program's literals and tables (`kas.constant`, `kas.table`) in the element type's
    range: a number beyond it would be the kernels' infinity (1e39 in a float32 program),
    where the same number given at a call is refused (`api.arguments`)."""
    from irfuse.diagnostics import CompileError, located
    from irfuse.dialects.kas import ConstantOp, TableOp

    for op in module.walk():
        if isinstance(op, (ConstantOp, TableOp)):
            beyond = element_type(dtype).beyond_range((op.number,) if isinstance(op, ConstantOp) else op.numbers)
            if beyond is not None:
                what = "the number" if isinstance(op, ConstantOp) else "a number of this kas.table"
                raise CompileError(located(f"{what} is {beyond}; the program is compiled for "
                                           f"{element_type(dtype).numpy.__name__}", op.location))


def _build_modules(jobs: list[tuple], pipeline: str | None, compile_gpu: bool, arch: str | None
                   ) -> list[CompiledProgram]:
    """Each of `jobs` (reference, lowered module, name, sums kernels) built (`_build_module`):
    for NVRTC where cores are idle (`_width`), side by side, each in a thread (NVRTC releases
    the GIL; the stages of a program over a mesh took 0.24, 0.50 and 0.15 s one after another
    for the explicit step on two cores). The compiles the cores allow are shared among the
    modules built at once, so that each module's own side-by-side steps (`build`'s `width`)
    do not put more compiles on the cores than they have: on two cores the explicit step's
    three modules at two compiles each (their first steps beside them) took 0.78 s against
    0.51 s one compile each (benchmarks/NOTES.md, Compiling, 2026-12-01). The cores are a
    semaphore the modules share: a module's units (`build`) run on the cores the others leave,
    so the explicit step's element pass, three units, does not compile them one after another
    once the other passes are done (0.66-0.70 s cold on two cores against 0.78-0.80; NOTES,
    Compiling, 2026-12-06, 10:30 UTC). Each module is built alone, so the results are those of
    building them in turn, and so is the error raised: the first job's that fails."""
    cores = _width() if compile_gpu else 1
    width = min(cores, len(jobs))
    if width == 1:
        return [_build_module(r, m, name, pipeline, compile_gpu, arch, sums, cores) for r, m, name, sums in jobs]
    import threading
    from concurrent.futures import ThreadPoolExecutor

    each = max(1, cores // width)
    shared = threading.BoundedSemaphore(cores)  # (a module's units take the cores the others leave)
    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = [pool.submit(_build_module, r, m, name, pipeline, compile_gpu, arch, sums, each, shared)
                   for r, m, name, sums in jobs]
        return [future.result() for future in futures]


def _build_module(reference: ModuleOp, module: ModuleOp, name: str, pipeline: str | None, compile_gpu: bool,
                  arch: str | None, sums_kernels: Sequence = (), width: int | None = None,
                  cores=None) -> CompiledProgram:
    """A lowered module built (`build`, with `sums_kernels` emitted too, `width` compiles at
    once, or its steps `width` at once on `cores` shared with other modules), its reference kept."""
    program = build(module, compile_gpu, arch, sums_kernels, width, cores)
    if compile_gpu and "fuse-load-by-readers" in expand_named_pipelines(pipeline or DEFAULT_PIPELINE):
        program = with_loads_by_readers(module, program, module_element_type(module).itemsize, SPILL_BYTES_KEPT,
                                        lambda m: build(m, compile_gpu, arch, sums_kernels, width, cores),
                                        run_pipeline)
    program.reference_module = reference
    program.meta = {"source": name, "pipeline": pipeline or DEFAULT_PIPELINE}
    return program


def _compile_module(result: FrontendResult, name: str, pipeline: str | None, dtype: str, compile_gpu: bool,
                    arch: str | None, planning: PlanningOptions | None, layout: str,
                    strides: dict[str, tuple[int, ...]] | None) -> tuple[CompiledProgram, list[Diagnostic]]:
    """One program's module compiled: element type and layout set, lowered, emitted, built."""
    reference, module = _lower_module(result, pipeline, dtype, planning, layout, strides)
    return _build_module(reference, module, name, pipeline, compile_gpu, arch), result.warnings
