"""Differential testing: a program through several of its best plans on the CPU against the
NumPy reference, and shrinking of a failing program to a minimal one.

`check_plans` is the oracle of the random-program tests and of `benchmarks/fuzz.py`;
`shrink` reduces a failing program statement by statement while it keeps failing the same
way, so the regression test kept for it shows only what matters.
"""

from __future__ import annotations

import os
import re
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import field

import numpy as np

from irfuse.analysis.batch_passes import batch_passes
from irfuse.artifact.records import record
from irfuse.driver.binaries import with_cpu_rendering
from irfuse.backend.cuda_emit import renders_loops
from irfuse.diagnostics import CompileError, IrfuseError
from irfuse.dialects.context import module_text
from irfuse.dialects.element_types import element_type
from irfuse.dialects.layouts import arrays_from_aos, arrays_to_aos, batch_shape
from irfuse.driver.compile import PlanningOptions, compile_program
from irfuse.driver.front import frontend
from irfuse.driver.sources import read_source
from irfuse.passes.fuse_partition import NoSuchPlan
from irfuse.passes.registry import partition_pipeline
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import (program_indices, random_inputs, run_references, uniform_names, value_shape,
                                           value_shapes)
from irfuse.runtime.streaming import ChunkedRun
from irfuse.transforms.node_phases import has_nodal_statements, split_at_nodal_statements
from irfuse.verification.verify import check_outputs


@record
class Outcome:
    """What happened to one program: `plans` plans ran and agreed, or `failure` says how not."""

    plans: int = 0
    in_kernel_loops: int = 0  # of those plans, how many ran a loop inside a kernel
    failure: str | None = None  # a kind: "mismatch", "frontend", or an exception's type name
    detail: str = ""
    invalid: bool = False  # the frontend refused the program: not a finding, the input was bad

    @property
    def ok(self) -> bool:
        return self.failure is None

    def signature(self) -> str:
        return "invalid" if self.invalid else (self.failure or "ok")


@record
class Budget:
    """Which plans and data a program is checked on."""

    top: int = 3
    dtype: str = "f64"
    n: int = 37
    seed: int = 0
    profile: str = "h100"
    max_size: int = 8
    host_loops: bool = False  # also the best plan that keeps every loop on the host
    # Also compile each plan's CUDA C to sm_90 with NVRTC (ptxas refuses what a CPU run
    # cannot notice: static shared memory past its limit, say), as a GPU run would.
    nvrtc: bool = False
    # Also run each plan on CHUNKED_N elements in chunks (passes over them where it reduces,
    # `runtime.streaming`), which must give the bits of one call.
    chunks: bool = False
    # The global arrays' layout the plans are compiled for and run on (inputs made as arrays
    # of structures and transposed; outputs transposed back before the comparison).
    layout: str = "aos"
    # A register table's path, or "ptxas" (with `nvrtc`): each plan's search rests on ptxas's
    # figures of the kernels compiled in turn (`driver.compile.compile_with_ptxas_figures`).
    registers: str | None = None
    extra: dict = field(default_factory=dict)


def _pipeline(top: int, k: int, budget: Budget, loops: str = "auto") -> str:
    """Plan k of the search's `top` best; odd plans with every kernel's values that several
    threads of an element read loaded by their readers (`fuse-load-by-readers{every=true}`,
    which the driver applies only where ptxas's figures show shared memory bounding a kernel),
    so that the CPU runs that step's kernels wherever a random program has such values. The
    generators rarely make them (none in 120 programs sampled, h100 plans; benchmarks/NOTES.md,
    Robustness runs, 2026-12-04 (evening)): the bake-off operators' tests run the step's
    kernels (tests/test_highorder.py)."""
    pipeline = partition_pipeline(top, k, budget.max_size, 1 << 22, budget.profile, loops=loops)
    return pipeline.replace("fuse-load-by-readers", "fuse-load-by-readers{every=true}") if k % 2 else pipeline


def fixed_inputs(module, seed: int) -> tuple:
    """Random numbers for every uniform numeric input of a program, as `constants=` fixes them
    when compiling (`CompileOptions.constants`): the differential tests' odd plans compile so,
    the reference then reading the same numbers from the program's `kas.table`s."""
    from irfuse.dialects.kas import IndexType, program_of

    program = program_of(module)
    rng = np.random.default_rng(seed)
    return tuple((name, tuple(t.shape), tuple(float(v) for v in rng.uniform(-1, 1, t.size)))
                 for name, t in sorted(zip(program.inputs, program.input_types()))
                 if name in program.uniform and not isinstance(t, IndexType))


def check_plans(path: str, budget: Budget) -> Outcome:
    """Runs plan 0..top-1 of the search on the CPU (and with `host_loops` the best plan with
    every loop on the host); compares every output with the reference."""
    try:
        program = frontend(read_source(path))
    except CompileError as e:
        return Outcome(failure="frontend", detail=str(e), invalid=True)
    if has_nodal_statements(program.module):
        return _check_node_passes(program.module, path, budget)
    out = Outcome()
    runs = [(k, budget.top, "auto") for k in range(budget.top)]
    if budget.host_loops and "kas.loop" in module_text(program.module):
        runs.append((0, 1, "host"))
    for k, top, loops in runs:
        pipeline = _pipeline(top, k, budget, loops)
        try:
            plan, _ = compile_program(path, pipeline, budget.dtype, compile_gpu=budget.nvrtc,
                                      arch="sm_90" if budget.nvrtc else None, layout=budget.layout,
                                      planning=PlanningOptions(registers=budget.registers),
                                      constants=fixed_inputs(program.module, budget.seed + k) if k % 2 else ())
        except NoSuchPlan:
            if k > 0:
                return out
            return Outcome(out.plans, out.in_kernel_loops, "NoSuchPlan", f"plan {k}: the search found no plan")
        except IrfuseError as e:
            return Outcome(out.plans, out.in_kernel_loops, "CompileError", f"plan {k}: {e}")
        except Exception as e:  # noqa: BLE001 -- a crash of the compiler is a finding, reported with its trace
            return Outcome(out.plans, out.in_kernel_loops, type(e).__name__, f"plan {k}: {traceback.format_exc()}")
        if plan.reference_program.nodal or program_indices(plan.reference_program):
            failure = _check_mesh_plan(plan, budget, k)
            if failure is not None:
                return Outcome(out.plans, out.in_kernel_loops, *failure)
            out.plans += 1
            continue
        try:
            inputs = random_inputs(plan.reference_program, budget.n, budget.seed + k,
                                   element_type(budget.dtype).numpy)
            device = CpuDevice(plan)
            whole = uniform_names(plan.reference_program)
            got = arrays_to_aos(Executor(plan, device).run(arrays_from_aos(inputs, budget.layout, whole),
                                                           budget.n).outputs, budget.layout, whole)
            want = run_references(plan.reference_program, inputs, budget.dtype, budget.n, plan.sum_by)
            differ = renderings_differ(plan, got, arrays_from_aos(inputs, budget.layout, whole), budget.n,
                                       budget.layout, whole) if k == 0 else []
            if differ:
                return Outcome(out.plans, out.in_kernel_loops, "renderings",
                               f"plan {k}: the CPU twin's {', '.join(differ)} differ from the loop rendering's bits")
            if budget.chunks:
                differ = chunks_differ(plan, device, budget.seed + k, budget.layout)
                differ += program_calls_differ(plan, budget.seed + k, budget.layout)
        except Exception as e:  # noqa: BLE001 -- a crash of the runtime is a finding too
            return Outcome(out.plans, out.in_kernel_loops, type(e).__name__, f"plan {k}: {traceback.format_exc()}")
        if differ:
            return Outcome(out.plans, out.in_kernel_loops, "chunks",
                           f"plan {k}: run in chunks, {', '.join(differ)} differ from one call")
        bad = [c.describe() for c in check_outputs(got, want, budget.dtype) if not c.ok]
        if bad:
            return Outcome(out.plans, out.in_kernel_loops, "mismatch", f"plan {k} (loops={loops}): " + "; ".join(bad))
        out.plans += 1
        out.in_kernel_loops += "fuse.loop" in module_text(plan.module)
    return out


def same_bits(a, b) -> bool:
    """Whether two results have the same bits, a NaN's sign and payload aside: IEEE 754 leaves
    them open for an arithmetic result, and the C++ compiler uses that freedom differently in
    different renderings (GCC computes fabs(x) * fabs(x) as x * x: where x is NaN, the sign of
    the NaN differs)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.tobytes() == b.tobytes():
        return True
    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind != "f":
        return False
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.array_equal(np.where(nan, 0, a).view(f"u{a.itemsize}"), np.where(nan, 0, b).view(f"u{b.itemsize}")))


def renderings_differ(plan, got: dict, arrays: dict, n: int, layout: str, whole) -> list[str]:
    """The outputs (`got`: the default CPU rendering's, as arrays of structures) whose bits the
    CPU twin does not give: the twin runs the generated CUDA block by block as the GPU does
    (barriers, shared memory poisoned), the loop rendering each element's statements; the
    same implementations in the same order, so the same bits (`same_bits`: a NaN's sign and
    payload aside). Nothing to compare where no kernel has a loop rendering (then both run the
    twin)."""
    if not renders_loops(plan.source):
        return []
    twin = with_cpu_rendering(plan, "emulate")
    emulated = arrays_to_aos(Executor(twin, CpuDevice(twin)).run(arrays, n).outputs, layout, whole)
    return [name for name in got if not same_bits(got[name], emulated[name])]


def _check_node_passes(module, path: str, budget: Budget) -> Outcome:
    """A program over a mesh with nodal statements: its passes over nodes and elements
    (`transforms.node_phases`), each planned with plan k (its last where it has fewer) and run
    on the CPU one after another on random meshes, their outputs against the whole program's
    reference; the elements pass also with `scatter="atomic"` (the same bits on the CPU)."""
    from irfuse.dialects.kas import program_of
    from irfuse.driver.compile import compile_frontend
    from irfuse.frontend.irgen import FrontendResult

    reference = program_of(module)
    plan = split_at_nodal_statements(module)
    out = Outcome()
    dtype = element_type(budget.dtype).numpy
    plans: dict[tuple[int, int], object] = {}  # (pass, plan) -> compiled: a pass with fewer plans reuses its last
    over = [step.over for step in plan.passes]

    def planned(p: int, k: int):
        if (p, k) not in plans:
            try:
                plans[p, k] = compile_frontend(
                    FrontendResult(plan.passes[p].module.clone()), os.path.basename(path),
                    _pipeline(budget.top, k, budget),
                    # (NVRTC for the elements' pass: the node passes' kernels are ordinary ones)
                    budget.dtype, budget.nvrtc and over[p] == "elements", "sm_90" if budget.nvrtc else None)[0]
            except NoSuchPlan as e:
                if e.found == 0:
                    raise
                plans[p, k] = planned(p, e.found - 1)
        return plans[p, k]

    for k in range(budget.top):
        try:
            inputs, nodes = random_mesh_inputs(reference, budget.n, budget.seed + k, dtype)
            made: dict[str, np.ndarray] = {}
            sum_by = 1 << 30
            for p, step in enumerate(plan.passes):
                compiled = planned(p, k)
                sum_by = min(sum_by, compiled.sum_by)
                given = {name: made[name] if name in made and name not in inputs else inputs[name]
                         for name in step.inputs}
                executor = Executor(compiled, CpuDevice(compiled))
                if step.over == "elements":
                    results = executor.run(given, budget.n, nodes=nodes).outputs
                    atomic = executor.run(given, budget.n, nodes=nodes, scatter="atomic").outputs
                    differ = [name for name in results if not same_bits(results[name], atomic[name])]
                    if differ:
                        return Outcome(out.plans, 0, "atomic", f"plan {k}: scatter='atomic' on the CPU changed "
                                       f"{', '.join(differ)}")
                else:
                    results = executor.run(given, nodes).outputs
                made.update(results)
            got = {name: made[name] for name in reference.outputs}
            want = run_references(reference, inputs, budget.dtype, budget.n, sum_by, nodes=nodes)
        except Exception:  # noqa: BLE001 -- a crash of the compiler or the runtime is a finding
            return Outcome(out.plans, 0, "exception", f"plan {k}: {traceback.format_exc()}")
        bad = [c.describe() for c in check_outputs(got, want, budget.dtype) if not c.ok]
        if bad:
            return Outcome(out.plans, 0, "mismatch", f"plan {k} on a mesh of {nodes} nodes: " + "; ".join(bad))
        out.plans += 1
    return out


def random_mesh_inputs(program, n: int, seed: int, dtype) -> tuple[dict[str, np.ndarray], int]:
    """Inputs of a program over a mesh of `n` elements, and its node count: random values as
    `random_inputs` draws them (nodal ones per node), and connectivities drawn by kind (the
    seed's remainder by 4): every entry the one node; most nodes named by no element;
    repeated nodes within elements; any node."""
    inputs = random_inputs(program, n, seed, dtype)
    rng = np.random.default_rng(seed)
    kind = seed % 4
    nodes = (1, 3 * n + 5, max(2, n // 2), n + 3)[kind]
    indices = program_indices(program)
    for name, t in zip(program.inputs, program.input_types()):
        if name in indices:
            count = t.count.data  # type: ignore[attr-defined]
            conn = rng.integers(0, n if kind == 1 else nodes, size=(n, count)).astype(np.int32)
            if kind == 2:
                conn[::3, 1] = conn[::3, 0]
            inputs[name] = conn
        elif name in program.nodal:
            inputs[name] = rng.uniform(-1, 1, (nodes, *tuple(t.shape))).astype(dtype)  # type: ignore
    return inputs, nodes


def _check_mesh_plan(plan, budget: Budget, k: int) -> tuple[str, str] | None:
    """A plan of a program over a mesh run on the CPU on random meshes (`random_mesh_inputs`)
    against the reference, ordered and with `scatter="atomic"` (which on the CPU adds in the
    same order: the same bits), and run as its kernels' twins (`emulate`), which must give the
    loop rendering's bits, and (plan 0) as a `Program` called on the same arrays and on copies
    of them (`mesh_calls_differ`), which must too; a failure's (kind, detail), or None."""
    try:
        inputs, nodes = random_mesh_inputs(plan.reference_program, budget.n, budget.seed + k,
                                           element_type(budget.dtype).numpy)
        executor = Executor(plan, CpuDevice(plan))
        got = executor.run(inputs, budget.n, nodes=nodes).outputs
        atomic = executor.run(inputs, budget.n, nodes=nodes, scatter="atomic").outputs
        twin = with_cpu_rendering(plan, "emulate")
        emulated = Executor(twin, CpuDevice(twin)).run(inputs, budget.n, nodes=nodes).outputs
        want = run_references(plan.reference_program, inputs, budget.dtype, budget.n, plan.sum_by, nodes=nodes)
        calls = mesh_calls_differ(plan, inputs, nodes, got) if k == 0 else []
    except Exception:  # noqa: BLE001 -- a crash of the compiler or the runtime is a finding
        return "exception", f"plan {k}: {traceback.format_exc()}"
    if calls:
        return "calls", f"plan {k}: calls of a Program on copies of the arrays changed {', '.join(calls)}"
    bad = [c.describe() for c in check_outputs(got, want, budget.dtype) if not c.ok]
    if bad:
        return "mismatch", f"plan {k} on a mesh of {nodes} nodes: " + "; ".join(bad)
    differ = [name for name in got if not same_bits(got[name], atomic[name])]
    if differ:
        return "atomic", f"plan {k}: scatter='atomic' on the CPU changed {', '.join(differ)}"
    differ = [name for name in got if not same_bits(got[name], emulated[name])]
    if differ:
        return "renderings", f"plan {k}: the twins (emulate) and the loops gave other bits of {', '.join(differ)}"
    return None


def mesh_calls_differ(plan, inputs: dict, nodes: int, got: dict) -> list[str]:
    """The outputs a `Program` of a plan over a mesh on the CPU, called on the inputs (each
    connectivity a `Connectivity`, uniform scalars as numbers) and then twice on copies of
    their arrays (arrays alike the last call's, which its fast path takes in their place:
    `HostFastCall._alike`), gives with other bits than the plan's run (`got`)."""
    from irfuse.api.programs import Program
    from irfuse.mesh import Connectivity

    index = program_indices(plan.reference_program)
    program = Program(plan, "cpu", [])
    try:
        # (uniform scalars as numbers, as a call made again takes them by value)
        args = {name: Connectivity(a, nodes) if name in index else float(a) if np.ndim(a) == 0 else a
                for name, a in inputs.items()}
        differ: set[str] = set()
        for _ in range(3):
            made = program(**args, nodes=nodes)
            differ |= {name for name in program.outputs if not same_bits(made[name], got[name])}
            args = {name: np.array(a) if isinstance(a, np.ndarray) else a for name, a in args.items()}
        return sorted(differ)
    finally:
        program.close()


CHUNKED_N = 601  # four chunks of 128 elements and one of 89, or seven of 97 and one of 19


def chunks_differ(plan, device, seed: int, layout: str = "aos") -> list[str]:
    """The outputs of `plan` (compiled for `layout`) on CHUNKED_N elements in chunks (of the
    reducing kernels' blocks, else of 97 elements) that differ from one call's, bit for bit."""
    program = plan.reference_program
    n = CHUNKED_N
    uniform = uniform_names(program)
    inputs = arrays_from_aos(random_inputs(program, n, seed, device.dtype), layout, uniform)
    whole = Executor(plan, device).run(inputs, n).outputs
    shapes = value_shapes(program)
    results = {name: np.full(value_shape(t, n, True) if name in uniform else batch_shape(layout, shapes[name], n),
                             np.nan, device.dtype)
               for name, t in zip(program.outputs, program.output_types())}
    align = batch_passes(plan.program).align
    run = ChunkedRun(plan, device, align if align > 1 else 97, tuple(program.inputs), tuple(program.outputs),
                     shapes, layout)
    run.run(inputs, results, n)
    return [name for name in program.outputs if not np.array_equal(results[name], whole[name], equal_nan=True)]


def _strided(a: np.ndarray, layout: str, step: int = 2) -> np.ndarray:
    """`a`'s values in a view of every `step`-th element of a larger array (the batch axis
    strided, the rest of it NaN)."""
    axis = 0 if layout == "aos" else a.ndim - 1
    shape = list(a.shape)
    shape[axis] *= step
    big = np.full(shape, np.nan, a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(None, None, step)
    view = big[tuple(index)]
    view[...] = a
    return view


def program_calls_differ(plan, seed: int, layout: str = "aos") -> list[str]:
    """What a `Program` of `plan` on the CPU gets wrong, as one call's results judge it: a call
    in chunks (`memory_budget=`) on strided views of the inputs into `out=` views, which must
    give one call's bits; uniform scalars given as Python numbers, and calls on copies of the
    inputs (arrays alike the last call's), which must too; a time loop carrying an output into
    an input (its calls after the first on new arrays), which must give its steps' bits; a batch of
    one element, checked against the reference; and a batch of none (empty per-element
    outputs, or a refusal when an output is uniform)."""
    from irfuse.api.programs import Program
    from irfuse.diagnostics import UsageError
    from irfuse.runtime.streaming import LANES, bytes_per_element, chunk_alignment, reduction_bytes

    program = Program(plan, "cpu", [])
    try:
        n = CHUNKED_N
        uniform = program.uniform
        inputs = arrays_from_aos(random_inputs(plan.reference_program, n, seed, program.dtype), layout, uniform)
        whole = program(**inputs)
        # Uniform scalars given as Python numbers (converted to the element type) give the same bits.
        numbers = {k: float(a) if k in uniform and np.ndim(a) == 0 else a for k, a in inputs.items()}
        if any(type(a) is float for a in numbers.values()):
            got = program(**numbers)
            bad_numbers = [f"{name} (uniform scalars given as Python numbers)" for name in program.outputs
                           if not np.array_equal(got[name], whole[name], equal_nan=True)]
        else:
            bad_numbers = []
        # Calls on copies of the inputs (new arrays alike the last call's, which the fast path
        # takes in their place: `HostFastCall._alike`) give the same bits.
        for _ in range(3):
            again = program(**{k: np.array(a) if isinstance(a, np.ndarray) else a for k, a in numbers.items()})
        bad_numbers += [f"{name} (a call on copies of the inputs)" for name in program.outputs
                        if not np.array_equal(again[name], whole[name], equal_nan=True)]
        # A time loop feeding an output back to an input of its kind and shape: the bits of its
        # steps called one by one.
        carry = next(({i: o} for o in program.outputs for i in program.inputs
                      if program.shapes[i] == program.shapes[o] and (i in uniform) == (o in uniform)), None)
        if carry is not None:
            from irfuse.api.time_loops import time_loop

            (i, o), = carry.items()
            step = dict(inputs)
            for _ in range(3):
                step[i] = program(**step)[o]
            looped = time_loop(program, 3, carry, **inputs)[o]
            if not np.array_equal(looped, step[i], equal_nan=True):
                bad_numbers.append(f"a time loop carrying {o} into {i}")
        align = chunk_alignment(plan)
        budget = LANES * bytes_per_element(plan) * max(align, 97) + reduction_bytes(plan, n)
        views = {k: a if k in uniform else _strided(a, layout) for k, a in inputs.items()}
        out = {k: np.full_like(a, np.nan) if k in uniform else _strided(np.full_like(a, np.nan), layout)
               for k, a in whole.items()}
        got = program(**views, out=out, memory_budget=budget)
        bad = bad_numbers + [f"{name} (chunks of strided views)" for name in program.outputs
                             if not np.array_equal(got[name], whole[name], equal_nan=True)]
        if program.last_chunks < 2 and n > max(align, 97):
            bad.append(f"(ran in {program.last_chunks} chunk, not several)")
        one = {k: a if k in uniform else np.ascontiguousarray(a[:1] if layout == "aos" else a[..., :1])
               for k, a in inputs.items()}
        report = program.check(**one)
        if not report.ok:
            bad.append(f"a batch of one element: {report}")
        none = {k: a if k in uniform else np.ascontiguousarray(a[:0] if layout == "aos" else a[..., :0])
                for k, a in inputs.items()}
        try:
            empty = program(**none)
            bad += [f"{name} (a batch of none gave shape {a.shape})" for name, a in empty.items() if a.size]
        except UsageError:
            if not uniform & set(program.outputs):
                bad.append("a batch of none was refused, yet every output has a batch axis")
        return bad
    finally:
        program.close()


def check_source(src: str, budget: Budget, directory: str | None = None) -> Outcome:
    with tempfile.NamedTemporaryFile("w", suffix=".kas", dir=directory, delete=False) as f:
        f.write(src)
    try:
        return check_plans(f.name, budget)
    finally:
        os.unlink(f.name)


# ---------------------------------------------------------------------------------------------
# Shrinking


_DECL = re.compile(r"^\s*([A-Za-z_]\w*)\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*;\s*$")
_INPUT = re.compile(r"^\s*input\s+(.*);\s*$")
_RETURN = re.compile(r"^\s*return\s+(.*);\s*$")
_STMT = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*\w+\((.*)\)\s*;\s*$")
_LOOP = re.compile(r"^\s*loop\s+\d+\s*\{\s*$")


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _types(lines: list[str]) -> dict[str, str]:
    types = {}
    for line in lines:
        m = _DECL.match(line)
        if m and m.group(1) not in ("input", "return"):
            for v in _names(m.group(2)):
                types[v] = m.group(1)
    return types


def _replace_uses(lines: list[str], start: int, old: str, new: str) -> list[str]:
    """Uses of `old` from line `start` on read `new` instead (arguments and outputs only)."""
    out = lines[:start]
    for line in lines[start:]:
        s, r = _STMT.match(line), _RETURN.match(line)
        if s:
            args = ", ".join(new if a == old else a for a in _names(s.group(2)))
            line = line[: s.start(2)] + args + line[s.end(2):]
        elif r:
            line = line[: r.start(1)] + ", ".join(new if a == old else a for a in _names(r.group(1))) + line[r.end(1):]
        out.append(line)
    return out


def _candidates(src: str):
    """Smaller variants of a program, most aggressive first."""
    lines = src.splitlines()
    types = _types(lines)
    inputs = next((_names(m.group(1)) for m in map(_INPUT.match, lines) if m), [])
    for i, line in enumerate(lines):  # unwrap a loop
        if _LOOP.match(line):
            depth = 0
            for j in range(i, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth == 0:
                    yield lines[:i] + lines[i + 1: j] + lines[j + 1:]
                    break
    for i, line in enumerate(lines):  # drop a statement, its readers reading an input instead
        m = _STMT.match(line)
        if not m:
            continue
        rest = lines[:i] + lines[i + 1:]
        yield rest
        target = m.group(1)
        for k, other in enumerate(rest):  # ... and no longer returned
            r = _RETURN.match(other)
            if r and target in _names(r.group(1)) and len(_names(r.group(1))) > 1:
                kept = ", ".join(x for x in _names(r.group(1)) if x != target)
                yield rest[:k] + [f"return {kept};"] + rest[k + 1:]
        same = [v for v in inputs if types.get(v) == types.get(m.group(1))]
        if same:
            yield _replace_uses(lines[:i] + lines[i + 1:], i, m.group(1), same[0])
    for i, line in enumerate(lines):  # drop an output, or read an input as an argument
        r = _RETURN.match(line)
        if r and len(_names(r.group(1))) > 1:
            outs = _names(r.group(1))
            for o in outs:
                yield lines[:i] + [f"return {', '.join(x for x in outs if x != o)};"] + lines[i + 1:]
        m = _STMT.match(line)
        if m:
            args = _names(m.group(2))
            for a, arg in enumerate(args):
                for v in inputs:
                    if v != arg and types.get(v) == types.get(arg):
                        new = args[:a] + [v] + args[a + 1:]
                        yield lines[:i] + [line[: m.start(2)] + ", ".join(new) + line[m.end(2):]] + lines[i + 1:]
                        break


def _tidy(src: str) -> str:
    """Removes inputs and declarations nothing reads any more."""
    lines = src.splitlines()
    used = set()
    for line in lines:
        if s := _STMT.match(line):
            used.update([s.group(1), *_names(s.group(2))])
        elif r := _RETURN.match(line):
            used.update(_names(r.group(1)))
    out = []
    for line in lines:
        m, d = _INPUT.match(line), _DECL.match(line)
        if m:
            keep = [v for v in _names(m.group(1)) if v in used]
            line = f"input {', '.join(keep)};" if keep else ""
        elif d and d.group(1) not in ("input", "return"):
            keep = [v for v in _names(d.group(2)) if v in used]
            line = f"{d.group(1)} {', '.join(keep)};" if keep else ""
        if line != "":
            out.append(line)
    return "\n".join(out) + "\n"


def shrink(src: str, fails: Callable[[str], bool], max_steps: int = 2000) -> str:
    """Greedy reduction: takes the first smaller variant that still `fails`, until none does."""
    current = src
    steps = 0
    progress = True
    while progress and steps < max_steps:
        progress = False
        for cand in _candidates(current):
            text = "\n".join(cand) + "\n"
            steps += 1
            if text != current and fails(text):
                current = text
                progress = True
                break
            if steps >= max_steps:
                break
    tidy = _tidy(current)
    return tidy if tidy != current and fails(tidy) else current


def shrink_failure(src: str, budget: Budget, directory: str | None = None) -> tuple[str, Outcome]:
    """Shrinks a program that fails `check_plans`, keeping the kind of failure it shows."""
    first = check_source(src, budget, directory)
    if first.ok or first.invalid:
        return src, first
    small = shrink(src, lambda s: check_source(s, budget, directory).signature() == first.signature())
    return small, check_source(small, budget, directory)
