"""Per-element values a later pass over the batch reads: stored, or computed again there
(`irfuse.transforms.recompute`, `fuse-partition{recompute}`)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import irfuse
from conftest import ROOT
from irfuse.dialects import fuse, kas
from irfuse.frontend.irgen import compile_source
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.runtime.streaming import LANES, bytes_per_element, reduction_bytes
from irfuse.transforms.dead_code import eliminate_dead_code
from irfuse.transforms.recompute import RECOMPUTED, crossing_values, recompute, value_name
from irfuse.verification.reference import random_inputs

# v is made before the maximum and read after it: computed again from x (12 bytes and one
# multiplication an element) it costs less than stored (12 bytes written, 12 read).
AGAIN = """uniform scalar c, m; vector3 x, v, y; scalar s; input x, c;
v = svmul3(x, c); s = vdot3(v, v); m = max(s); y = svmul3(v, m); return y;"""
NORM_SCALE = os.path.join(ROOT, "benchmarks", "programs", "norm_scale.kas")
# v comes out of a loop: it cannot be computed again by cloning calls, so it is stored.
LOOPED = """vector3 x, v, y; scalar s; uniform scalar m; input x;
v = svmul3(x, 2.0); loop 3 { v = vadd3(v, x); } s = vdot3(v, v); m = max(s); y = svmul3(v, m); return y;"""


def program(src: str) -> kas.ProgramOp:
    p = kas.program_of(compile_source(src, "t.kas").module)
    eliminate_dead_code(p)
    return p


def test_the_values_a_later_pass_reads_are_found_where_they_can_be_computed_again():
    assert [value_name(op) for op in crossing_values(program(AGAIN))] == ["v"]
    assert [value_name(op) for op in crossing_values(program(open(NORM_SCALE).read()))] == ["v"]
    for name in ("cfl_step.kas", "strain_energy.kas", "bigfusion.kas"):
        assert crossing_values(program(open(os.path.join(ROOT, "examples", name)).read())) == []
    assert crossing_values(program(LOOPED)) == []


def test_computing_again_clones_the_calls_for_the_later_pass_and_drops_what_nothing_reads():
    p = program(open(NORM_SCALE).read())
    recompute(p, crossing_values(p))
    calls = [op for op in p.body.block.ops if isinstance(op, kas.CallOp)]
    again = [op for op in calls if RECOMPUTED in op.attributes]
    # mmul33, smmul33 and mvmul33 again, in pass 1; the first pass keeps its own (vdot3 reads v).
    assert [op.op_name for op in again] == ["mmul33", "smmul33", "mvmul33"]
    assert {op.attributes[RECOMPUTED].data for op in again} == {1}
    scale = next(op for op in calls if op.op_name == "svmul3")
    assert scale.args[0] is again[-1].res
    assert [op.op_name for op in calls if RECOMPUTED not in op.attributes] == ["mmul33", "smmul33", "mvmul33",
                                                                                "vdot3", "svmul3"]
    p.verify()


def kernels(src: str, recompute_choice: str):
    pipeline = DEFAULT_PIPELINE.replace("fuse-partition", f"fuse-partition{{recompute={recompute_choice}}}")
    prog = irfuse.compile(src, backend="cpu", filename="again.kas", pipeline=pipeline)
    return prog, [op for op in prog.compiled.module.walk() if isinstance(op, fuse.KernelOp)]


def test_the_search_computes_again_what_costs_less_than_storing_and_stores_the_rest():
    _, auto = kernels(AGAIN, "auto")
    assert [k.recomputed.data[0].data if k.recomputed else None for k in auto] == [None, "v"]
    assert "v" not in [a.name_hint for k in auto for a in k.body.block.args[k.num_inputs.data:]]
    _, stored = kernels(AGAIN, "never")
    assert not any(k.recomputed for k in stored)
    # NormScale: v from A and x (48 bytes) costs more to read again than to store (24 bytes).
    _, norm = kernels(open(NORM_SCALE).read(), "auto")
    assert not any(k.recomputed for k in norm)
    _, forced = kernels(open(NORM_SCALE).read(), "always")
    assert [sorted(s.data for s in k.recomputed.data) if k.recomputed else None for k in forced] == [None, ["K", "v"]]


@pytest.mark.parametrize("src", [AGAIN, "norm_scale"])
def test_stored_and_computed_again_give_the_same_bits_in_one_call_and_in_chunks(src):
    src = open(NORM_SCALE).read() if src == "norm_scale" else src
    n = 4093
    results = []
    for choice in ("never", "always"):
        prog, _ = kernels(src, choice)
        ins = random_inputs(prog.compiled.reference_program, n, 5, np.float32)
        want = prog(**ins, verify=True)
        per = bytes_per_element(prog.compiled) * LANES
        got = prog(**ins, memory_budget=per * 1000 + reduction_bytes(prog.compiled, n))
        assert prog.last_chunks > 1
        for k in prog.outputs:
            np.testing.assert_array_equal(got[k], want[k])
        results.append(want)
    for k in prog.outputs:
        np.testing.assert_array_equal(results[0][k], results[1][k])


def test_the_choice_is_the_same_on_every_compile_and_refused_options_are_named():
    from irfuse.driver.compile import compile_text
    from irfuse.passes import fuse_partition

    texts = []
    for _ in range(2):
        fuse_partition._PLANS.clear()  # a search of its own each time, not the memo's
        texts.append(str(compile_text(AGAIN, "again.kas", compile_gpu=False)[0].module))
    assert texts[0] == texts[1] and "recomputed" in texts[0]
    with pytest.raises(irfuse.UsageError, match="recompute must be one of auto, never, always, got 'sometimes'"):
        kernels(AGAIN, "sometimes")


def test_plan_says_which_values_are_stored_and_which_computed_again(tmp_path):
    path = tmp_path / "again.kas"
    path.write_text(AGAIN)
    out = subprocess.run([sys.executable, "-m", "irfuse", "plan", str(path), "--top", "1"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "values a later pass over the batch reads: v computed again there" in out.stdout
    out = subprocess.run([sys.executable, "-m", "irfuse", "plan", NORM_SCALE, "--top", "1"], capture_output=True,
                         text=True)
    assert "v stored by the pass that makes it and read back" in out.stdout


def test_random_programs_that_read_a_value_after_a_reduction_give_the_same_bits_stored_or_computed_again():
    """Random programs over batch-wide values whose statements after a reduction read a value
    made before it: stored and computed again give the same bits, in one call and in chunks,
    and both match the reference."""
    from irfuse.testing.random_programs import random_program

    found = []
    for seed in range(200):
        src = random_program(seed, 10, batch_wide=True)
        if crossing_values(program(src)):
            found.append(src)
        if len(found) == 2:
            break
    assert len(found) == 2
    n = 1500
    for src in found:
        runs = []
        for choice in ("never", "always"):
            prog, ks = kernels(src, choice)
            assert any(k.recomputed for k in ks) == (choice == "always")
            ins = random_inputs(prog.compiled.reference_program, n, 9, np.float32)
            one = prog(**ins, verify=True)
            per = bytes_per_element(prog.compiled) * LANES
            chunked = prog(**ins, memory_budget=per * 400 + reduction_bytes(prog.compiled, n))
            for k in prog.outputs:
                np.testing.assert_array_equal(chunked[k], one[k])
            runs.append(one)
        for k in prog.outputs:
            np.testing.assert_array_equal(runs[0][k], runs[1][k])
