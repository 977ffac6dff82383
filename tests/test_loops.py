"""Loops inside kernels: the search runs whole loops in one kernel where the cost model finds
it cheaper, and every such plan computes what the reference does on the CPU backend (both
thread orders, both layouts, partial last blocks); the host-loop plan stays available."""

import os

import numpy as np
import pytest

from conftest import EXAMPLES, LONG
from irfuse.dialects import fuse
from irfuse.dialects.layouts import from_aos
from irfuse.driver.compile import compile_text
from irfuse.frontend.irgen import compile_source
from irfuse.transforms.dead_code import eliminate_dead_code
from irfuse.passes.registry import partition_pipeline
from irfuse.planner.cost import H100
from irfuse.planner.search import plan_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import random_inputs, run_references
from irfuse.verification.verify import check_outputs
from irfuse.testing.differential import Budget, check_source
from irfuse.testing.random_programs import random_program

POWER = """matrix3x3 A; vector3 x; scalar n;
input A, x;
loop 20 { x = mvmul33(A, x); n = venorm3(x); n = srcp(n); x = svmul3(x, n); }
return x;
"""
NESTED = """matrix3x3 A, B; vector3 x, y; scalar s;
input A, B, x;
loop 3 {
  loop 2 { x = mvmul33(A, x); s = vdot3(x, x); }
  y = mvmul33(B, x);
  A = madd33(A, B);
}
s = vdot3(y, x);
return A, s, y;
"""
# mmul33 and mtrans33 offer 3 threads per element (row), vdot3 and svmul3 one: a loop kernel
# with 3 threads per element runs the one-thread calls on remapped threads, through shared memory.
MAPPINGS = """matrix3x3 M, Q, T; vector3 v; scalar s;
input M, Q, v;
loop 3 {
  T = mmul33(M, Q);
  M = mtrans33(T);
  v = mvmul33(M, v);
  s = vdot3(v, v);
}
T = madd33(M, M);
return T, v, s;
"""
ONCE = """matrix3x3 A; vector3 x, y;
input A, x;
loop 1 { y = mvmul33(A, x); x = vadd3(y, x); }
y = vsub3(x, y);
return x, y;
"""
PROGRAMS = {"power": POWER, "nested": NESTED, "mappings": MAPPINGS, "once": ONCE}


def _run(src: str, pipeline: str, layout: str, n: int = 261, dtype: str = "f64"):
    """Compiles a program with a pipeline, runs it on the CPU in both thread orders; returns
    the compiled program after checking every output against the reference."""
    plan, _ = compile_text(src, "loops.kas", pipeline, dtype, compile_gpu=False, layout=layout)
    ref = plan.reference_program
    inputs = random_inputs(ref, n, 5, np.float64 if dtype == "f64" else np.float32)
    want = run_references(ref, inputs, dtype)
    for reverse in (False, True):
        got = Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(
            {k: from_aos(v, layout) for k, v in inputs.items()}, n).outputs
        if layout == "soa":
            got = {k: np.moveaxis(v, -1, 0) for k, v in got.items()}
        bad = [c.describe() for c in check_outputs(got, want, dtype) if not c.ok]
        assert not bad, (pipeline, layout, reverse, bad)
    return plan


def _loop_kernels(plan) -> list[fuse.KernelOp]:
    return [k for k in plan.module.ops if isinstance(k, fuse.KernelOp)
            and any(isinstance(op, fuse.LoopOp) for op in k.walk())]


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_default_plan_runs_the_loop_in_a_kernel_and_matches_the_reference(name, layout):
    plan = _run(PROGRAMS[name], None, layout)
    assert _loop_kernels(plan), plan.source  # the default plan keeps the loop on chip
    assert "kas.loop" not in str(plan.module)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_host_loop_plan_matches_the_reference(name):
    plan = _run(PROGRAMS[name], partition_pipeline(1, 0, 8, 1 << 22, "h100", loops="host"), "aos")
    assert not _loop_kernels(plan) and "kas.loop" in str(plan.module)


def _plans_with_several_mappings(src: str, top: int, keep: int, layout: str) -> list[int]:
    """Indices of the search's plans whose loop kernel runs calls of different thread counts."""
    module = compile_source(src, "m.kas").module
    program = next(op for op in module.walk() if op.name == "kas.program")
    eliminate_dead_code(program)
    dags, plans = plan_program(program, 1 << 22, H100, 4, 8, top=top, keep=keep, layout=layout)
    out = []
    for k, p in enumerate(plans):
        for c in p.configs:
            if any(dags[c.dag].ops[i].name == "kas.loop" for i in c.group) and len({i.bx for i in c.impls}) > 1:
                out.append(k)
                break
    return out


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_a_loop_kernel_with_several_thread_mappings_matches_the_reference(layout):
    """Row calls on 3 threads and remapped one-thread calls in one loop body: carried values in
    shared memory, barriers around the back edge, checked by running it."""
    top, keep = 20, 4  # such plans cost more than one thread per element: look further down the list
    picks = _plans_with_several_mappings(MAPPINGS, top, keep, layout)
    assert picks, "the search offers no loop kernel mixing thread counts"
    for k in picks[:2]:
        plan = _run(MAPPINGS, partition_pipeline(top, k, 8, 1 << 22, "h100", keep=keep), layout, dtype="f32")
        kernels = _loop_kernels(plan)
        assert kernels and max(k.bx.data for k in kernels) == 3
        loop = next(op for k in kernels for op in k.walk() if isinstance(op, fuse.LoopOp))
        assert any(isinstance(op, fuse.BarrierOp) for op in loop.body.block.ops)  # the back edge needs one


@pytest.mark.parametrize("seed", range(12 if LONG else 3))  # (more: long mode)
def test_random_programs_with_loops_agree_in_kernels_and_on_the_host(seed, tmp_path):
    """Random programs rich in loops (nested, 1 to 3 iterations, read after the loop) through
    their three best plans and the best host-loop plan."""
    src = random_program(seed, 8 + seed % 5, loop_rate=0.5)
    out = check_source(src, Budget(top=3, host_loops=True, seed=seed), str(tmp_path))
    assert out.ok, (src, out.failure, out.detail)
    if "loop" in src:
        assert out.in_kernel_loops >= 1, src


def test_the_random_programs_reach_nested_loops_and_single_iterations():
    sources = [random_program(seed, 8 + seed % 5, loop_rate=0.5) for seed in range(6)]
    assert any("  loop " in s for s in sources)  # a loop in a loop's body
    assert any("loop 1 {" in s for s in sources)


def test_rotation_loop_runs_its_loop_and_the_norm_after_it_in_one_kernel():
    path = next(p for p in EXAMPLES if os.path.basename(p) == "rotation_loop.kas")
    plan = _run(open(path).read(), None, "aos", dtype="f32")
    assert len(plan.kernels) == 1 and _loop_kernels(plan)


@pytest.mark.parametrize("renderer", ["loop", "emulate"])
def test_a_carried_array_read_in_part_first_is_copied_whole(renderer, monkeypatch):
    """A loop's result carried into a second loop whose first reader reads one row of it
    (`item_0`) and whose next reads all of it (`pop`): the copy into the second loop's place
    copies every word, not the first reader's (it copied one word; a taped loop's history is
    this program), in one kernel on both CPU renderings."""
    import irfuse

    monkeypatch.setenv("IRFUSE_CPU_RENDERER", renderer)
    src = """scalar x, y, s, b; vector2 H;
input x;
y = scale(x, 1);
H = repeat_2_s(y);
loop 2 { H = push_2_s(H, y); y = smul(y, x); }
b = scale(x, 0);
loop 2 { s = item_0_2(H); H = pop_2(H); b = add(b, s); }
return b;
"""
    prog = irfuse.compile(src, backend="cpu", dtype="f64")
    assert len(prog.kernels) == 1
    x = np.random.default_rng(0).uniform(0.5, 1.5, 37)
    np.testing.assert_array_equal(prog(x=x)["b"], x * x + x)  # the states y after 1 and 0 steps
