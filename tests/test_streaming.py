"""A batch in host memory run in chunks that fit a device-memory budget (`runtime.streaming`):
the results of one call, bit for bit, whatever the chunks."""

import itertools
import os
import re

import numpy as np
import pytest

import irfuse
from conftest import EXAMPLES, LONG
from irfuse.analysis.batch_passes import batch_passes
from irfuse.dialects.kas import program_of
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.verification.reference import random_inputs
from irfuse.runtime.streaming import (CHUNK_BYTES, LANES, MIN_CHUNK_BYTES, MIN_CHUNKS, bytes_per_element,
                                      chunk_elements, reduction_bytes)
from irfuse.testing.random_programs import random_program


def example(name: str) -> str:
    return next(p for p in EXAMPLES if os.path.basename(p) == name)


def inputs(prog, n: int, layout: str, seed: int = 3) -> dict:
    aos = random_inputs(prog.compiled.reference_program, n, seed, np.float32)
    return aos if layout == "aos" else {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in aos.items()}


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("name", ["stvenant.kas", "power_iteration.kas", "bigfusion.kas"])
def test_chunks_of_any_size_give_the_results_of_one_call(name, layout):
    prog = irfuse.compile(example(name), backend="cpu", layout=layout)
    n = 1001
    ins = inputs(prog, n, layout)
    want = prog(**ins)
    assert prog.last_chunks == 0  # no budget on the CPU backend: the whole batch in place
    per = bytes_per_element(prog.compiled) * LANES
    # Budgets for 1 element a chunk, 10 (101 chunks, the last of 1), 333 (four chunks, the
    # last of 2), the whole batch, more than it.
    for elements, chunks in ((1, 1001), (10, 101), (333, 4), (1001, 1), (5000, 1)):
        got = prog(**ins, memory_budget=per * elements + per - 1)
        assert prog.last_chunks == chunks
        for k in prog.outputs:
            np.testing.assert_array_equal(got[k], want[k])


def test_a_batch_of_one_element_and_out_arrays_in_chunks():
    prog = irfuse.compile(example("stvenant.kas"), backend="cpu")
    one = inputs(prog, 1, "aos", seed=5)
    want = prog(**one)
    got = prog(**one, memory_budget=1 << 20)
    assert prog.last_chunks == 1
    for k in prog.outputs:
        np.testing.assert_array_equal(got[k], want[k])
    ins = inputs(prog, 50, "aos", seed=6)
    want = prog(**ins)
    outs = {k: np.full_like(want[k], np.nan) for k in prog.outputs}
    per = bytes_per_element(prog.compiled) * LANES
    back = prog(**ins, out=outs, memory_budget=per * 16)
    assert prog.last_chunks == 4
    for k in prog.outputs:
        assert back[k] is outs[k]
        np.testing.assert_array_equal(outs[k], want[k])


def test_an_output_written_over_its_input_in_chunks():
    prog = irfuse.compile(example("synctest.kas"), backend="cpu")
    a = np.random.default_rng(7).random((300, 3, 3), dtype=np.float32)
    want = prog(a.copy()).F
    # F over A shifted by one element: each chunk's results would reach the next chunk's
    # inputs if they were read in place; the inputs are staged first.
    big = np.concatenate([a, a[-1:]])
    src, dst = big[1:], big[:-1]
    src_values = src.copy()
    prog(src, out=dst, memory_budget=bytes_per_element(prog.compiled) * LANES * 7)
    np.testing.assert_array_equal(dst, prog(src_values).F)
    prog(a, out=a, memory_budget=bytes_per_element(prog.compiled) * LANES * 7)
    np.testing.assert_array_equal(a, want)


def test_budgets_name_what_they_cannot_hold_and_runs_do_not_pile_up():
    prog = irfuse.compile(example("synctest.kas"), backend="cpu", filename="stream_growth.kas")
    per = bytes_per_element(prog.compiled) * LANES
    assert per == (9 + 9) * 4 * LANES  # A in, F out, no temporaries between kernels
    a = np.zeros((10, 3, 3), np.float32)
    with pytest.raises(irfuse.UsageError, match=f"cannot hold one element in each of {LANES} lanes"):
        prog(a, memory_budget=per - 1)
    assert chunk_elements(prog.compiled, 10, None) == 10
    # A large batch in at least MIN_CHUNKS chunks, of at most CHUNK_BYTES a lane and at least
    # MIN_CHUNK_BYTES where the batch allows: its first and last transfers overlap nothing.
    one = bytes_per_element(prog.compiled)
    big = 1 << 40
    for n, chunk in ((10, 10), (MIN_CHUNK_BYTES // one, MIN_CHUNK_BYTES // one),
                     (MIN_CHUNKS * 3 * (MIN_CHUNK_BYTES // one), 3 * (MIN_CHUNK_BYTES // one)),
                     (1 << 30, CHUNK_BYTES // one)):
        assert chunk_elements(prog.compiled, n, big) == chunk
    assert chunk_elements(prog.compiled, 1 << 30, CHUNK_BYTES) == CHUNK_BYTES // (LANES * one)
    for n in range(1, 12):  # a chunk length per batch size below the budget: the oldest released
        prog(np.zeros((n, 3, 3), np.float32), memory_budget=1 << 20)
    assert len(prog._bound) == irfuse.api.programs.BOUND_SIZES


def test_progress_is_reported_per_chunk_only_when_asked(capfd):
    prog = irfuse.compile(example("stvenant.kas"), backend="cpu")
    ins = inputs(prog, 50, "aos", seed=8)
    per = bytes_per_element(prog.compiled) * LANES
    seen = []
    want = prog(**ins)
    got = prog(**ins, memory_budget=per * 16, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    for k in prog.outputs:
        np.testing.assert_array_equal(got[k], want[k])
    seen.clear()
    prog(**ins, progress=lambda done, total: seen.append((done, total)))  # one piece: one report, at the end
    assert seen == [(1, 1)]
    capfd.readouterr()
    prog(**ins, memory_budget=per * 16)
    assert capfd.readouterr().err == ""  # nothing drawn unless asked
    prog(**ins, memory_budget=per * 16, progress=True)
    err = capfd.readouterr().err
    assert "stvenant: chunks" in err and "4/4" in err
    with pytest.raises(irfuse.UsageError, match="progress= takes True, False or a callable"):
        prog(**ins, progress="yes")


# --- programs that reduce over the batch: passes over the chunks ---------------------------

NORMALIZED = """vector3 x, y;
scalar s;
uniform scalar m;
input x;
s = venorm3(x);
m = max(s);
y = svmul3(x, m);
return y;
"""
# Two levels of reductions, a uniform output of each, a sum (whose bits depend on the order
# of its additions) and a loop reading a combined value.
TWO_LEVELS = """vector3 x, y, z;
scalar s, t;
uniform scalar m, q, r;
input x;
s = venorm3(x);
m = max(s);
r = srcp(m);
y = svmul3(x, r);
t = venorm3(y);
q = sum(t);
z = svmul3(y, q);
loop 3 {
  z = svmul3(z, r);
  z = vadd3(z, y);
}
return z, q, m;
"""


def soa_inputs(prog, n: int, layout: str, seed: int, dtype=np.float32) -> dict:
    ins = random_inputs(prog.compiled.reference_program, n, seed, dtype)
    if layout == "soa":
        ins = {k: v if k in prog.uniform else np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in ins.items()}
    return ins


def budget_for(prog, n: int, elements: int) -> int:
    """A budget whose lanes hold `elements` elements each beside what the reductions keep."""
    return bytes_per_element(prog.compiled) * LANES * elements + reduction_bytes(prog.compiled, n)


# Every kernel one element a thread (the default pipeline lets reducing kernels run several).
ONE_A_THREAD = DEFAULT_PIPELINE.replace("fuse-partition", "fuse-partition{per_thread=one}")


def chunk_align(prog) -> int:
    """Elements a chunk of the program holds a multiple of (its reducing kernels' blocks)."""
    return batch_passes(program_of(prog.compiled.module)).align


@pytest.mark.parametrize("per_thread", ["auto", "one"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("source", [NORMALIZED, TWO_LEVELS, "strain_energy.kas", "cfl_step.kas"])
def test_programs_that_reduce_give_the_bits_of_one_call_in_chunks(source, layout, dtype, per_thread):
    """Chunks of whole reducing blocks; every reduction combined once over all their
    partials, the passes after it reading the combined value (a chunk's own maximum in y,
    or its own sum in q, would give other numbers). Blocks of m = 128 elements with one
    element a thread; 128 to 512 where the threads of a reducing kernel may run several."""
    prog = irfuse.compile(source if "\n" in source else example(source), backend="cpu", layout=layout, dtype=dtype,
                          pipeline=None if per_thread == "auto" else ONE_A_THREAD)
    m = chunk_align(prog)
    assert m == 128 or (per_thread == "auto" and m in (256, 512))
    n = 8 * m - 23  # seven whole blocks and one short of 23 elements
    ins = soa_inputs(prog, n, layout, seed=11, dtype=np.float64 if dtype == "f64" else np.float32)
    want = prog(**ins)
    # Lanes of m, 2m (the last chunk 23 short), 2m + 44 (taken down to 2m), 3m elements; the
    # whole batch.
    for elements, chunks in ((m, 8), (2 * m, 4), (2 * m + 44, 4), (3 * m, 3), (n, 1)):
        got = prog(**ins, memory_budget=budget_for(prog, n, elements))
        assert prog.last_chunks == chunks
        for k in prog.outputs:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} in {chunks} chunks")


def test_each_pass_over_a_reducing_batch_reports_its_chunks():
    """cfl_step: pass 0 gives the maximum's partials, pass 1 the outputs (four chunks each);
    strain_energy: pass 0 gives sig, e and U's partials, pass 1 only the combined U, which it
    copies once (one report)."""
    for name, reports in (("cfl_step.kas", 8), ("strain_energy.kas", 5)):
        prog = irfuse.compile(example(name), backend="cpu")
        ins = inputs(prog, 1000, "aos", seed=2)
        seen = []
        prog(**ins, memory_budget=budget_for(prog, 1000, 256), progress=lambda d, t: seen.append((d, t)))
        assert prog.last_chunks == 4 and seen == [(k, reports) for k in range(1, reports + 1)]


def test_budgets_too_small_for_whole_reducing_blocks_say_so():
    prog = irfuse.compile(NORMALIZED, backend="cpu", pipeline=ONE_A_THREAD)
    x = np.ones((1000, 3), np.float32)
    per = bytes_per_element(prog.compiled) * LANES
    kept = reduction_bytes(prog.compiled, 1000)
    assert kept == (8 + 1) * 4  # a word of each of eight blocks' partials, the combined maximum
    with pytest.raises(irfuse.UsageError, match=f"cannot hold 128 elements in each of {LANES} lanes "
                                                f"\\({per * 128} bytes\\) beside the {kept} bytes its reductions"):
        prog(x, memory_budget=per * 128 + kept - 1)
    with pytest.raises(irfuse.UsageError, match="cannot hold one element in each of"):
        prog(x, memory_budget=kept + per - 1)
    assert chunk_elements(prog.compiled, 1000, per * 200 + kept) == 128
    assert chunk_elements(prog.compiled, 100, per * 100 + reduction_bytes(prog.compiled, 100)) == 100  # any length


def reducing_programs(count: int) -> list[str]:
    """The first `count` random batch-wide programs that reduce over the batch."""
    found = (random_program(seed, 10, batch_wide=True) for seed in range(200))
    return list(itertools.islice((src for src in found if re.search(r"= (sum|max|min)\(", src)), count))


@pytest.mark.parametrize("k", range(6 if LONG else 3))  # (more: long mode)
def test_random_programs_with_reductions_in_chunks_give_the_bits_of_one_call(k):
    src = reducing_programs(6)[k]
    prog = irfuse.compile(src, backend="cpu")
    n = 700
    ins = soa_inputs(prog, n, "aos", seed=k)
    want = prog(**ins)
    got = prog(**ins, memory_budget=budget_for(prog, n, 256))
    assert prog.last_chunks == 3
    for name in prog.outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=src)


def test_page_locking_names_the_argument_it_cannot_take():
    with pytest.raises(irfuse.UsageError, match="argument 2 is a list, not a NumPy array"):
        with irfuse.page_locked(np.zeros(3), [1.0, 2.0]):
            pass
    with pytest.raises(irfuse.UsageError, match=r"argument 1 is not C-contiguous \(strides \(32, 16\)\)"):
        with irfuse.page_locked(np.zeros((4, 4))[:, ::2]):
            pass
    from irfuse.runtime.cuda_device import gpu_available
    if not gpu_available():  # (the GPU tests lock and release pages)
        with pytest.raises(irfuse.IrfuseError, match="the CUDA backend"):
            with irfuse.page_locked(np.zeros(3)):
                pass


def test_the_differential_chunk_check_catches_chunks_that_cut_reducing_blocks(monkeypatch):
    """`Budget(chunks=True)` runs every plan in chunks against one call: with chunks of 97
    elements, which cut the reducing kernels' blocks of 128, a sum differs and the check says
    so (the fuzz runs rely on it failing)."""
    import dataclasses

    import irfuse.testing.differential as differential
    from irfuse.testing.differential import Budget, check_source

    src = TWO_LEVELS
    assert check_source(src, Budget(top=1, n=37, chunks=True)).ok
    real = differential.batch_passes
    monkeypatch.setattr(differential, "batch_passes", lambda p: dataclasses.replace(real(p), align=1))
    out = check_source(src, Budget(top=1, n=37, chunks=True))
    assert out.failure == "chunks" and "differ from one call" in out.detail
