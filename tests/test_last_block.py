"""Reductions combined by the reducing kernel's last block (`fuse.kernel` finish_parts): the
choice (`transforms.last_block`, the cost model's `finish_parts`), the launch arguments the
runtime gives such a kernel (its combines' results and a counter where the recording runs the
combines; null pointers elsewhere), and the CPU backend's bits, which never depend on it. The
GPU's own bits are tested in `test_gpu.py`."""

from dataclasses import replace

import numpy as np
import pytest

from conftest import EXAMPLES, RecordingDevice

SRC = ("vector3 v; scalar s; uniform scalar t, hi; uniform vector3 c;\ninput v;\n"
       "s = vdot3(v, v);\nt = sum(s);\nhi = max(s);\nc = sum(v);\nreturn s, t, hi, c;")


def test_the_cost_model_takes_the_last_block_only_where_a_combine_kernel_costs_more():
    from irfuse.planner.cost import (H100, H200, combine_kernels_time, finish_parts, last_block_combine_time,
                                     load_profile)

    # Measured on the H200: a combine kernel launched in the graph costs less than the last block.
    assert finish_parts(H100, 256, 1, 1) == 0 and finish_parts(H200, 64, 2, 2) == 0
    assert finish_parts(load_profile("cpu"), 256, 1, 1) == 0
    slow = replace(H100, launch_overhead=5e-6)  # a GPU whose launches cost more
    parts = finish_parts(slow, 256, 1, 1)
    assert parts > 0 and parts % (256 * 8) == 0
    assert last_block_combine_time(slow, parts, 256, 1) <= combine_kernels_time(slow, 1)
    assert last_block_combine_time(slow, parts + 256 * 8, 256, 1) > combine_kernels_time(slow, 1)
    assert finish_parts(slow, 256, 2, 1) < parts  # twice the words to combine: fewer partials


def _compiled(finish: str, by: int = 64):
    from irfuse.driver.compile import compile_text

    plan, _ = compile_text(SRC, "fin.kas", f"kas-dce,fuse-each{{by={by} finish={finish}}}", "f32", compile_gpu=False)
    return plan


def test_a_launch_gets_its_combines_results_and_a_counter_where_the_recording_runs_the_combines():
    from irfuse.runtime.executor import Executor

    plan = _compiled("last-block")
    reducing = [k for k in plan.kernels if k.finish_parts]
    assert {k.finish_parts for k in reducing} == {8192} and len(reducing) == 3  # sum, max, vector sum
    for n, finished in ((64 * 100, True), (64 * 8192, True), (64 * 8192 + 1, False)):
        dev = RecordingDevice()
        Executor(plan, dev).prepare({"v": np.zeros((n, 3), np.float32)}, n)
        names = [k for k, _ in dev.launches]
        for k in reducing:
            buffers = next(b for name, b in dev.launches if name == k.name)
            extra = buffers[len(k.inputs) + len(k.outputs):]
            assert len(extra) == 2  # the combine's result, the counter
            if finished:
                assert all(isinstance(b, np.ndarray) for b in extra)
                assert extra[1].shape == (1,) and not extra[1].any()  # the counter starts at 0
            else:
                assert extra == [0, 0]
        combines = [name for name in names if name.startswith("irf_combine")]
        assert len(combines) == (0 if finished else 3)
    # A pass of a run in chunks runs the combines over the whole batch afterwards: null pointers.
    dev = RecordingDevice()
    part = plan.host.passes[0]
    Executor(plan, dev).prepare({"v": np.zeros((6400, 3), np.float32)}, 6400, part=part,
                                bound={v: np.empty(1) for v in part.partials})
    for k in reducing:
        buffers = next(b for name, b in dev.launches if name == k.name)
        assert buffers[len(k.inputs) + len(k.outputs):] == [0, 0]


def test_a_kernel_without_finish_parts_takes_no_more_arguments():
    from irfuse.runtime.executor import Executor

    plan = _compiled("kernels")
    assert not any(k.finish_parts for k in plan.kernels)
    dev = RecordingDevice()
    Executor(plan, dev).prepare({"v": np.zeros((640, 3), np.float32)}, 640)
    for name, buffers in dev.launches:
        k = next(k for k in plan.kernels if k.name == name)
        assert len(buffers) == len(k.inputs) + len(k.outputs)


@pytest.mark.parametrize("by", [48, 256])
def test_the_cpu_backend_gives_the_same_bits_whichever_finishes(by):
    """The CPU runs the combine kernels either way (its renderings never combine in a kernel),
    in one call and in chunks."""
    import irfuse
    from irfuse.runtime.streaming import LANES, bytes_per_element, reduction_bytes

    rng = np.random.default_rng(by)
    n = by * 97 + 5
    v = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    got = {}
    for finish in ("last-block", "kernels"):
        prog = irfuse.compile(SRC, backend="cpu", pipeline=f"kas-dce,fuse-each{{by={by} finish={finish}}}",
                              filename="fin.kas")
        one = prog(v, verify=True)
        per = bytes_per_element(prog.compiled) * LANES
        chunked = prog(v, memory_budget=per * 1000 + reduction_bytes(prog.compiled, n))
        assert prog.last_chunks > 1
        for k in ("s", "t", "hi", "c"):
            assert getattr(chunked, k).tobytes() == getattr(one, k).tobytes()
        got[finish] = one
    for k in ("s", "t", "hi", "c"):
        assert getattr(got["last-block"], k).tobytes() == getattr(got["kernels"], k).tobytes()


def test_the_default_pipeline_plans_no_last_block_on_the_built_in_profiles():
    from irfuse.driver.compile import PlanningOptions, compile_program

    for name in ("cfl_step.kas", "strain_energy.kas"):
        path = next(p for p in EXAMPLES if p.endswith(name))
        for profile in ("h100", "h200", "cpu"):
            plan, _ = compile_program(path, None, "f32", compile_gpu=False,
                                      planning=PlanningOptions(n=65536, profile=profile))
            assert not any(k.finish_parts for k in plan.kernels), (name, profile)
