"""ptxas's figures in the plan: a register table's spilled bytes charged by the cost model,
`registers="ptxas"` compiling the search's plan and searching again with its kernels' figures
until the plan chosen was priced with its own (`driver.compile.compile_with_ptxas_figures`),
and where no table says, the registers and spills of a block-per-element kernel estimated
(`cost.estimated_spill_bytes`)."""

import json
import os
import sys
from dataclasses import replace

import pytest

from conftest import EXAMPLES, ROOT, check_top_plans_on_cpu
from irfuse.diagnostics import CompileError, UsageError
from irfuse.dialects.fuse import KernelOp
from irfuse.driver import ptxas_rounds
from irfuse.driver.compile import PlanningOptions, compile_from, compile_program, compile_with_ptxas_figures
from irfuse.driver.ptxas_rounds import priced_with_figures
from irfuse.driver.options import compile_options
from irfuse.driver.sources import Source
from irfuse.kernel.bridge import model_from_kernel
from irfuse.driver.planning import search
from irfuse.planner.cost import (SPILL_RELOAD_REGISTERS, estimate_registers, estimated_spill_bytes, kernel_cost,
                                 load_profile, peak_register_words, spill_time)
from irfuse.planner.registers import CompiledFigures, load_register_table, signature

sys.path.insert(0, os.path.join(ROOT, "examples", "highorder"))
import operators  # noqa: E402 -- the bake-off's element operators at any order


def _table(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_a_table_entry_is_registers_or_registers_and_spilled_bytes(tmp_path):
    table = load_register_table(_table(tmp_path, {"a": 96, "b": {"registers": 255, "spill_bytes": 4096},
                                                  "c": {"registers": 40}}))
    assert table == {"a": CompiledFigures(96), "b": CompiledFigures(255, 4096), "c": CompiledFigures(40)}
    assert [v.as_json() for v in table.values()] == [96, {"registers": 255, "spill_bytes": 4096}, 40]
    for bad in ({"a": 0}, {"a": 256}, {"a": True}, {"a": {"registers": 64, "spill_bytes": -1}},
                {"a": {"registers": 64, "spills": 8}}, {"a": {"spill_bytes": 8}}, [64]):
        with pytest.raises(CompileError, match="maps kernel signatures to register counts"):
            load_register_table(_table(tmp_path, bad, "bad.json"))


def _kernels(program):
    return [op for op in program.module.ops if isinstance(op, KernelOp)]


def test_spilled_bytes_are_charged_as_local_memory_traffic(tmp_path):
    """Each thread's spill stores and loads move through global memory beside the kernel's own
    bytes: the same kernel with the same registers costs that traffic more at the copy rate."""
    path = next(e for e in EXAMPLES if e.endswith("neo_hookean.kas"))
    program, _ = compile_program(path, None, "f32", compile_gpu=False)
    kernel = _kernels(program)[0]
    model = model_from_kernel(kernel, 4)[0]
    profile, n = load_profile("h100"), 1 << 22
    sizes = [v.size for v in model.values.values() if v.is_input or v.stored]
    plain = kernel_cost(model, n, profile, sizes, 64)
    spilled = kernel_cost(model, n, profile, sizes, 64, spill_bytes=512)
    threads = -(-n // model.by) * model.threads
    assert plain.t_spill == 0 and spilled.t_spill == pytest.approx(spill_time(threads, 512, profile))
    assert spilled.t_spill == pytest.approx(threads * 512 / profile.bandwidth)
    assert spilled.time >= profile.launch_overhead + spilled.t_mem + spilled.t_spill
    assert spilled.time > plain.time


def test_a_one_thread_kernel_is_priced_spilling_only_past_twice_a_threads_registers(monkeypatch):
    """hex8 in float64: its one kernel of one thread an element counts 440 registers at its peak
    (`peak_register_words`), past a thread's 255, and ptxas holds it unspilled (202 registers
    on sm_90). Priced as spilling only past `ONE_THREAD_COUNT_OVER_REGISTERS` times 255, it
    is priced without spills, where at the count itself it was charged 1,480 bytes a thread;
    NVRTC's own figures for the kernel are checked beside the estimate."""
    from irfuse.planner import cost

    path = next(e for e in EXAMPLES if e.endswith("hex8.kas"))
    program, _ = compile_program(path, None, "f64", compile_gpu=True)
    (kernel,) = _kernels(program)
    model = model_from_kernel(kernel, 8)[0]
    profile = load_profile("h100")
    count = peak_register_words(model)
    assert model.bx == 1 and profile.max_regs_per_thread < count <= 2 * profile.max_regs_per_thread
    assert estimated_spill_bytes(model, profile) == 0
    figures = program.resources(kernel.sym_name.data)
    assert figures.registers <= profile.max_regs_per_thread and figures.spill_stores == figures.spill_loads == 0
    monkeypatch.setattr(cost, "ONE_THREAD_COUNT_OVER_REGISTERS", 1)
    assert estimated_spill_bytes(model, profile) == (count - profile.max_regs_per_thread) * 8


def test_a_float32_one_thread_kernel_keeps_its_count_as_its_registers():
    """BP1's whole element as one kernel of one thread an element: at order 2 in float64 it
    counts 408 registers (two a word), priced spilling only past twice 255: nothing (ptxas held
    it in 222); at order 3 in float32 it counts 399, priced spilling past 255 itself (ptxas
    held such a kernel in 255 registers at one block an SM: the count is closer in float32)."""
    profile, n = load_profile("h100"), 1 << 20
    for order, itemsize, over in ((2, 8, 2), (3, 4, 1)):
        ones = [c.model for c in _whole_element_configs("bp1", order, n, itemsize=itemsize) if c.model.bx == 1]
        past = [m for m in ones if profile.max_regs_per_thread < peak_register_words(m) <= 2 * profile.max_regs_per_thread]
        assert past
        for m in past:
            excess = max(0, -(-peak_register_words(m) // over) - profile.max_regs_per_thread)
            assert estimated_spill_bytes(m, profile) == excess * 8 and (excess > 0) == (itemsize == 4)


def test_float64_compute_of_a_one_thread_kernel_needs_fewer_warps():
    """The compute term's efficiency is `occupancy * COMPUTE_WARPS` at float32's rate; in a kernel
    of one thread an element a float64 pipe (half the rate) fills at half the warps, so hex8 in
    float64 at its 16% occupancy is priced at 1.9 times the rate `occupancy * 2` gives; a kernel
    spreading an element over threads (BP3's at order 6) keeps `occupancy * 2`."""
    from irfuse.kernel.model import OpKind, op_weights
    from irfuse.planner.cost import COMPUTE_WARPS, call_flops, peak_flops

    profile, n = load_profile("h100"), 1 << 22
    path = next(e for e in EXAMPLES if e.endswith("hex8.kas"))
    program, _ = compile_program(path, None, "f64", compile_gpu=False)
    one = model_from_kernel(_kernels(program)[0], 8)[0]
    spread = next(c.model for c in _whole_element_configs("bp3", 6, n) if c.model.bx > 1 and not c.cost.t_spill)
    for model, warps in ((one, COMPUTE_WARPS * profile.fp32_flops / profile.fp64_flops), (spread, COMPUTE_WARPS)):
        sizes = [v.size for v in model.values.values() if v.is_input or v.stored]
        c = kernel_cost(model, n, profile, sizes)
        assert c.occupancy * warps < 1
        flops = call_flops(model, n, profile) + sum(runs * n * op.impl.bx * profile.remap_ops for op, runs in
                                                    zip(model.ops, op_weights(model.ops))
                                                    if op.kind == OpKind.CALL and op.remap)
        assert c.t_compute == pytest.approx(flops / (peak_flops(profile, 8) * c.occupancy * warps))
    assert profile.fp32_flops / profile.fp64_flops > 1.9


def test_a_table_saying_the_plan_spills_moves_the_search_to_another(tmp_path):
    """A register table claiming that every kernel of BigFusion's plan spills 64 KB a thread
    (ptxas's figures as a compile records them) makes the search choose other kernels; the
    same table gives the same plan every time."""
    path = next(e for e in EXAMPLES if e.endswith("bigfusion.kas"))
    program, _ = compile_program(path, None, "f32", compile_gpu=False)
    sigs = {signature(model_from_kernel(k, 4)[0]) for k in _kernels(program)}
    table = _table(tmp_path, {s: {"registers": 255, "spill_bytes": 65536} for s in sigs})
    moved, _ = compile_program(path, None, "f32", compile_gpu=False, planning=PlanningOptions(registers=table))
    again, _ = compile_program(path, None, "f32", compile_gpu=False, planning=PlanningOptions(registers=table))
    moved_sigs = {signature(model_from_kernel(k, 4)[0]) for k in _kernels(moved)}
    assert moved_sigs and not moved_sigs & sigs
    assert moved.source == again.source


@pytest.mark.heavy
def test_ptxas_rounds_settle_on_a_plan_priced_with_its_own_figures(tmp_path):
    """BK1 at order 7 in float64: the search's first plan is priced by estimate; compiled, its
    figures make it dearer than another plan, which is compiled in turn. The plan returned is
    one whose every kernel the table held with the figures ptxas gave it, and the rounds give
    the same table, plan and code twice."""
    source = Source(operators.bk1_source(7, 9), "bk1_p7.kas")
    options = compile_options("f64", "cuda", profile="h100", registers="ptxas", arch="sm_90")
    program, _, table = compile_with_ptxas_figures(source, options)
    figures = program.compiled_figures()
    assert figures and all(table[sig] == f for sig, f in figures.items())
    assert len(table) > len(figures)  # (at least one other plan compiled on the way)
    again, _, table_again = compile_with_ptxas_figures(source, options)
    assert table_again == table and again.source == program.source


def test_rounds_cut_short_keep_the_cheapest_plan_compiled(monkeypatch):
    """With the rounds cut to two plans (BK1 at order 7: neither settles), the plan kept is one
    ptxas was asked about, and the cheaper of the two with their own figures: never the
    search's last choice unpriced."""
    monkeypatch.setattr(ptxas_rounds, "PTXAS_ROUNDS", 1)
    source = Source(operators.bk1_source(7, 9), "bk1_p7.kas")
    options = compile_options("f64", "cuda", profile="h100", registers="ptxas", arch="sm_90")
    program, _, table = compile_with_ptxas_figures(source, options)
    assert program.compiled_figures() and set(program.compiled_figures()) <= set(table)
    default, _ = compile_from(source, replace(options, registers=None))
    assert priced_with_figures(program, options) <= priced_with_figures(default, options)


def test_a_plan_settled_with_ptxas_figures_agrees_with_the_reference(tmp_path):
    """The plan the rounds settle on (BK1 at order 4, float64) runs on the CPU against the
    reference, as every plan of the search does."""
    path = tmp_path / "bk1_p4.kas"
    path.write_text(operators.bk1_source(4, 6))
    assert check_top_plans_on_cpu(str(path), 1, "f64", 5, nvrtc=True, registers="ptxas") == 1


def test_ptxas_figures_need_the_cuda_backend(tmp_path):
    with pytest.raises(UsageError, match="registers='ptxas'.*cpu backend has none"):
        compile_options("f32", "cpu", registers="ptxas")
    path = next(e for e in EXAMPLES if e.endswith("synctest.kas"))
    with pytest.raises(UsageError, match="needs the cuda backend"):
        compile_program(path, None, "f32", compile_gpu=False, planning=PlanningOptions(registers="ptxas"))


def test_ptxas_figures_without_nvrtc_are_refused_by_name(monkeypatch):
    """Where NVRTC cannot be loaded, `registers="ptxas"` is refused saying so, not with a trace."""
    from irfuse.backend import nvrtc

    def missing():
        raise RuntimeError("libnvrtc.so: cannot open shared object file")

    monkeypatch.setattr(nvrtc, "_nvrtc_version", missing)
    with pytest.raises(UsageError, match="registers='ptxas' compiles the plan's kernels with NVRTC, which is "
                                         "not usable here: libnvrtc.so"):
        compile_options("f32", "cuda", registers="ptxas")


def test_a_compile_writes_its_kernels_figures_and_the_table_reads_them_back(tmp_path):
    """`irfuse compile -o DIR`'s registers.json of BK1 at order 7 (float64: ptxas spills its
    second kernel, of rows) holds each kernel's registers and, where it spilled, the bytes, and
    reads back as the same figures."""
    source = Source(operators.bk1_source(7, 9), "bk1_p7.kas")
    program, _ = compile_from(source, compile_options("f64", "cuda", profile="h100", arch="sm_90"))
    program.save(str(tmp_path / "out"))
    written = json.load(open(tmp_path / "out" / "registers.json"))
    figures = program.compiled_figures()
    assert written and set(written) == set(figures) and any(f.spill_bytes for f in figures.values())
    for sig, value in written.items():
        assert value == (figures[sig].registers if not figures[sig].spill_bytes else
                         {"registers": figures[sig].registers, "spill_bytes": figures[sig].spill_bytes})
    assert load_register_table(str(tmp_path / "out" / "registers.json")) == figures


def _searched(kind: str, order: int, top: int = 1):
    """The search's `top` best plans of a bake-off element operator in float64 (h100 profile)."""
    source = Source(getattr(operators, f"{kind}_source")(order, order + 2), f"{kind}_p{order}.kas")
    stages, _ = search(source, compile_options("f64", "cuda", profile="h100"), top, 8, None)
    return stages[0].plans


def test_a_block_per_element_plan_keeps_lines_where_rows_would_pass_the_registers():
    """BK3 at order 7 in float64: kernels holding a contraction's rows (q*q words a value a
    thread, 81 here) need far more than a thread's 255 registers and were planned at the
    launch bounds' 64, running 5x slower than lines on an H200; priced at the registers they
    need and their spills, the search keeps every call on lines (q words a value), within a
    thread's registers and spilling nothing by estimate."""
    plan = _searched("bk3", 7)[0]
    profile = load_profile("h100")
    for config in plan.configs:
        assert {impl.name for impl in config.impls} == {"line"}
        assert config.model.bx > 1 and config.cost.t_spill == 0
        assert config.cost.registers == min(estimate_registers(config.model), profile.max_regs_per_thread)


def _whole_element_configs(kind: str, order: int, n: int, keep: int = 50, itemsize: int = 8):
    """Every analysed configuration of the bake-off operator's whole element (its one phase
    as one kernel, `dag.whole_phases`), float64 (or `itemsize`), h100 profile."""
    from irfuse.dialects.kas import program_of
    from irfuse.driver.compile import run_pipeline
    from irfuse.driver.front import frontend
    from irfuse.planner.dag import whole_phases
    from irfuse.planner.search import group_configs, program_dags

    source = Source(getattr(operators, f"{kind}_source")(order, order + 2), f"{kind}_p{order}.kas")
    dags = program_dags(program_of(run_pipeline(frontend(source).module, "kas-dce")))
    (group,) = whole_phases(dags[0], True)
    return group_configs(dags, 0, group, n, load_profile("h100"), itemsize, keep)[0]


def test_words_past_a_threads_registers_are_priced_as_spills():
    """BP3's whole element at order 6 (float64) as one kernel: its configurations of 49 and 56
    threads an element keep some calls on rows (q*q words a value a thread), hundreds of
    registers past 255 at their peak. Such a kernel is priced at the registers its values need
    (the estimate, not the launch bounds' 64) with the registers past 255 stored and loaded once
    at the copy rate and reloaded once more for every `SPILL_RELOAD_REGISTERS`, and would cost
    less at the launch bounds' registers without spills, as it was priced before."""
    profile, n = load_profile("h100"), 1 << 20
    configs = _whole_element_configs("bp3", 6, n)
    rows = [c for c in configs if peak_register_words(c.model) > profile.max_regs_per_thread]
    assert rows and all(c.model.bx > 1 and "row" in {i.name for i in c.impls} for c in rows)
    for c in rows:
        sizes = [v.size for v in c.model.values.values() if v.is_input or v.stored]
        spilled = estimated_spill_bytes(c.model, profile)
        excess = peak_register_words(c.model) - profile.max_regs_per_thread
        assert spilled == excess * 8 + excess * excess * 4 // SPILL_RELOAD_REGISTERS
        cost = kernel_cost(c.model, n, profile, sizes)
        threads = -(-n // c.model.by) * c.model.threads
        assert cost.registers == min(estimate_registers(c.model), profile.max_regs_per_thread) > 64
        assert cost.t_spill == pytest.approx(spill_time(threads, spilled, profile)) and cost.t_spill > 0
        assert kernel_cost(c.model, n, profile, sizes, 64).time < cost.time


def test_spills_growing_faster_than_the_registers_spilled_keep_bp3_off_rows(monkeypatch):
    """BP3 at order 6 in float64: a kernel keeping a contraction's rows needed 903 registers a
    thread past 255; charged one store and one load a register it was the plan chosen, and ptxas
    spilled 33 KB a thread of it (2.5x slower than lines on an H200). Since the element's vector
    is reshaped by lines too, the whole element is one kernel of lines, within a thread's
    registers (the plan), and the configurations of the element that mix in rows cost more than
    it however their spills are charged; charged with the reloads, the more so."""
    from irfuse.passes import fuse_partition
    from irfuse.planner import cost

    profile, n = load_profile("h100"), 1 << 20
    monkeypatch.setattr(fuse_partition, "_PLANS", {})
    plan = _searched("bp3", 6)[0]
    assert len(plan.configs) == 1 and {i.name for i in plan.configs[0].impls} == {"line"}
    assert all(peak_register_words(c.model) <= profile.max_regs_per_thread and c.cost.t_spill == 0
               for c in plan.configs)
    charged = {(c.model.bx, c.model.by): c.cost.time for c in _whole_element_configs("bp3", 6, n)}
    monkeypatch.setattr(cost, "SPILL_RELOAD_REGISTERS", 1 << 40)
    linear = {(c.model.bx, c.model.by): c.cost.time for c in _whole_element_configs("bp3", 6, n)}
    lines = min(t for (bx, _), t in charged.items() if bx == 64)
    mixed = [shape for shape in charged if shape[0] != 64]
    assert mixed and all(linear[shape] > lines and charged[shape] > linear[shape] for shape in mixed)
