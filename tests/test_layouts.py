"""Structure-of-arrays batches, `(*shape, N)`: kernels emitted, planned and run for them on
the CPU backend, through the executor, the Python API and `irfuse run --layout soa`."""

import os
import subprocess
import sys

import numpy as np
import pytest

import irfuse
from conftest import EXAMPLES
from irfuse.dialects.layouts import from_aos, to_aos
from irfuse.driver.compile import compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import random_inputs, run_references
from irfuse.verification.verify import check_outputs

UNFUSED = "kas-dce,fuse-each,fuse-verify-races"  # loads and stores through shared memory


def example(name: str) -> str:
    return next(p for p in EXAMPLES if os.path.basename(p) == name)


@pytest.mark.parametrize("pipeline", [None, UNFUSED], ids=["default", "unfused"])
@pytest.mark.parametrize("name", ["bigfusion.kas", "rotation_loop.kas", "stvenant.kas", "transform44.kas"])
def test_examples_in_structure_of_arrays_match_the_reference(name, pipeline):
    """Every global array (inputs, outputs, temporaries between kernels, loop-carried values)
    in SoA: register loads and stores (the default plan) and shared-memory word-run copies
    (unfused), in both thread orders, on a batch whose last block is partial."""
    plan, _ = compile_program(example(name), pipeline, "f32", compile_gpu=False, layout="soa")
    assert plan.layout == "soa" and all("structure of arrays" in plan.source for _ in plan.kernels)
    ref = plan.reference_program
    n = 517
    inputs = random_inputs(ref, n, 3, np.float32)
    want = run_references(ref, inputs, "f32")
    for reverse in (False, True):
        got = Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(
            {k: from_aos(v, "soa") for k, v in inputs.items()}, n).outputs
        assert all(v.shape == (*ref.output_types()[i].shape, n) for i, v in enumerate(got.values()))
        checks = check_outputs({k: to_aos(v, "soa") for k, v in got.items()}, want, "f32")
        assert all(c.ok for c in checks), [c.describe() for c in checks]


def test_soa_kernels_read_what_aos_kernels_read_transposed():
    """The same program in both layouts computes the same values from the same data (the same
    device functions in the same order): a kernel indexing the wrong word or element would not."""
    path = example("stvenant_inner.kas")
    aos, _ = compile_program(path, UNFUSED, "f32", compile_gpu=False)
    soa, _ = compile_program(path, UNFUSED, "f32", compile_gpu=False, layout="soa")
    n = 300
    inputs = random_inputs(aos.reference_program, n, 9, np.float32)
    a = Executor(aos, CpuDevice(aos)).run(inputs, n).outputs
    s = Executor(soa, CpuDevice(soa)).run({k: from_aos(v, "soa") for k, v in inputs.items()}, n).outputs
    for k in a:
        np.testing.assert_array_equal(to_aos(s[k], "soa"), a[k])


def test_the_cost_model_counts_a_word_run_per_soa_word():
    """A block's chunk of an AoS array is one contiguous run; of an SoA array one run per word,
    so small blocks cost more sectors in SoA (each run starts a sector)."""
    from irfuse.planner.cost import global_sectors

    assert global_sectors(1024, 4, [9], 4, "aos") == 256 * 5  # 144 bytes: 5 sectors per block
    assert global_sectors(1024, 4, [9], 4, "soa") == 256 * 9  # 9 runs of 16 bytes
    assert global_sectors(1024, 128, [9], 4, "aos") == global_sectors(1024, 128, [9], 4, "soa")


# --- the Python API ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bigfusion():
    return irfuse.compile(example("bigfusion.kas"), backend="cpu")


def _batch(prog, n, seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(-1, 1, (n, *prog.shapes[k])).astype(np.float32) for k in prog.inputs}


def test_api_takes_either_layout_and_answers_in_it(bigfusion):
    n = 333
    aos = _batch(bigfusion, n)
    soa = {k: from_aos(v, "soa") for k, v in aos.items()}
    want = bigfusion(**aos).F
    got = bigfusion(**soa).F
    assert bigfusion.layout == "aos" and got.shape == (5, 5, n)
    np.testing.assert_array_equal(to_aos(got, "soa"), want)
    variant = bigfusion.for_layout("soa")
    assert variant.layout == "soa" and variant is bigfusion.for_layout("soa") and "structure of arrays" in repr(variant)
    assert bigfusion.check(**soa).ok
    out = np.full((5, 5, n), np.nan, np.float32)
    assert bigfusion(*[soa[k] for k in bigfusion.inputs], out=out).F is out
    np.testing.assert_array_equal(out, got)
    # Strided SoA views (every other element of a longer batch) give the contiguous results.
    wide = {k: from_aos(np.repeat(v, 2, axis=0), "soa") for k, v in aos.items()}
    views = {k: v[..., ::2] for k, v in wide.items()}
    np.testing.assert_array_equal(bigfusion(**views).F, got)


def test_a_program_compiled_for_soa_settles_shapes_that_fit_both():
    """(3, 3, 3) is three 3x3 matrices either way: the program's own layout decides."""
    source = "matrix3x3 A, F;\ninput A;\nF = mmul33(A, A);\nreturn F;\n"  # not element-wise
    soa = irfuse.compile(source, backend="cpu", layout="soa")
    aos = irfuse.compile(source, backend="cpu")
    assert soa is not aos and soa.layout == "soa"
    rng = np.random.default_rng(1)
    cube = rng.uniform(-1, 1, (3, 3, 3)).astype(np.float32)
    as_soa = soa(cube).F  # elements are cube[..., e]
    as_aos = aos(cube).F  # elements are cube[e]
    np.testing.assert_array_equal(as_soa, from_aos(aos(np.ascontiguousarray(to_aos(cube, "soa"))).F, "soa"))
    assert not np.array_equal(as_soa, as_aos)


@pytest.mark.parametrize("call, message", [
    (lambda p, soa, aos: p(**{**soa, "A": aos["A"]}),
     r"input 'A' has shape \(40, 3, 3\), array of structures, the batch axis first, and the call's other arrays "
     r"are laid out the other way \(structure of arrays, the batch axis last\): pass every argument in one layout "
     r"\(\(3, 3, N\) for this one\)"),
    (lambda p, soa, aos: p(**soa, out=np.empty((40, 5, 5), np.float32)),
     r"out= array for 'F' has shape \(40, 5, 5\), array of structures"),
    (lambda p, soa, aos: p(**{**soa, "D": np.zeros((5, 4, 40), np.float32)}),
     r"input 'D' has shape \(5, 4, 40\); expected \(N, 5, 5\) \(array of structures, the batch axis first\) or "
     r"\(5, 5, N\) \(structure of arrays, the batch axis last\)"),
    (lambda p, soa, aos: p(**{**soa, "c": np.zeros((3, 39), np.float32)}),
     r"input 'c' holds 39 elements, the other arguments \(A, B, D, E\) 40"),
    (lambda p, soa, aos: p.for_layout("columns"), "layout must be one of aos, soa, got 'columns'"),
])
def test_bad_soa_arguments_are_refused_by_name(bigfusion, call, message):
    aos = _batch(bigfusion, 40)
    soa = {k: from_aos(v, "soa") for k, v in aos.items()}
    with pytest.raises(irfuse.UsageError, match=message):
        call(bigfusion, soa, aos)


def test_compile_refuses_an_unknown_layout():
    with pytest.raises(irfuse.UsageError, match="layout 'columns' is not one of aos, soa"):
        irfuse.compile(example("synctest.kas"), backend="cpu", layout="columns")


# --- irfuse run --layout soa --------------------------------------------------------------


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_run_reads_and_writes_soa_npz_files(tmp_path):
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (3, 3, 57)).astype(np.float32)
    np.savez(tmp_path / "in.npz", A=a)
    p = cli("run", example("synctest.kas"), "--backend", "cpu", "--layout", "soa", "--inputs",
            str(tmp_path / "in.npz"), "--save", str(tmp_path / "out.npz"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified against the NumPy reference" in p.stdout and "soa" in p.stdout
    f = np.load(tmp_path / "out.npz")["F"]
    assert f.shape == (3, 3, 57)
    want = run_references(irfuse.compile(example("synctest.kas"), backend="cpu").compiled.reference_program,
                          {"A": to_aos(a, "soa")}, "f32").float64["F"]
    np.testing.assert_allclose(to_aos(f, "soa"), want, rtol=1e-5, atol=1e-5)
    # The same file is not an array-of-structures batch; a plan carries its own layout.
    p = cli("run", example("synctest.kas"), "--backend", "cpu", "--inputs", str(tmp_path / "in.npz"))
    assert p.returncode != 0 and "input 'A' has shape (3, 3, 57); a matrix3x3 batch is shaped (N, 3, 3) " \
                                 "(--layout aos)" in p.stderr
    p = cli("compile", example("synctest.kas"), "--layout", "soa", "-o", str(tmp_path / "plan"))
    assert p.returncode == 0, p.stdout + p.stderr
    p = cli("run", "--plan", str(tmp_path / "plan"), "--backend", "cpu", "--inputs", str(tmp_path / "in.npz"))
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
    p = cli("run", "--plan", str(tmp_path / "plan"), "--layout", "aos", "--backend", "cpu")
    assert p.returncode != 0 and "--layout cannot be given with it" in p.stderr


def test_a_python_program_runs_on_soa_arrays():
    """A function under @irfuse.program is traced again for its SoA variant (the passes
    consume the IR they are given): both layouts give the reference's results."""
    from python_programs.seeds import bigfusion as bigfusion_fn

    prog = irfuse.compile(bigfusion_fn, backend="cpu")
    n = 129
    aos = _batch(prog, n, 5)
    got = prog(**{k: from_aos(v, "soa") for k, v in aos.items()}).F
    want = run_references(prog.compiled.reference_program, aos, "f32")
    assert all(c.ok for c in check_outputs({"F": to_aos(got, "soa")}, want, "f32"))
    np.testing.assert_array_equal(to_aos(got, "soa"), prog(**aos).F)


def test_soa_register_loads_are_staged_all_or_none(monkeypatch):
    """A structure-of-arrays kernel stages its leading register loads through shared memory
    (16-byte runs on the GPU) all of them or none: none past the staging cap (not the first
    few), in an array-of-structures kernel, with several elements a thread, with runs that are
    not whole 16-byte pieces, or where an input is a strided view; the CPU twin loads directly."""
    import irfuse.kernel.policies as km

    def plan(name, layout="soa", pipeline=None):
        return compile_program(example(name), pipeline, "f32", layout=layout)[0]

    big = plan("bigfusion.kas")
    assert big.kernels[0].arrays == [128 * s for s in (9, 9, 3, 25, 25)]  # A, B, c, D, E
    assert big.source.count("irf_load_runs16<") == 5
    assert plan("bigfusion.kas", "aos").kernels[0].arrays == []
    # Several elements a thread: none staged (the reads would need rows).
    assert plan("bigfusion.kas", pipeline="kas-dce,fuse-each{by=128 per_thread=2},fuse-promote-registers,"
                "fuse-place-barriers,fuse-verify-races").kernels[0].arrays == []
    # Blocks whose runs are not whole 16-byte pieces: none.
    assert plan("bigfusion.kas", pipeline="kas-dce,fuse-each{by=2},fuse-promote-registers,fuse-place-barriers,"
                "fuse-verify-races").kernels[0].arrays == []
    # One strided input: none (its runs are not contiguous), the others included.
    prog = irfuse.compile(example("bigfusion.kas"), backend="cpu", layout="soa")
    n = 300
    soa = {k: from_aos(v, "soa") for k, v in random_inputs(big.reference_program, n, 3).items()}
    wide = np.repeat(soa["c"], 2, axis=-1)
    variant = prog._for("soa", prog._view_strides({**soa, "c": wide[..., ::2]}, None, "soa"))
    assert variant.strides and "irf_load_runs16<" not in variant.source
    np.testing.assert_array_equal(prog(**{**soa, "c": wide[..., ::2]}).F, prog(**soa).F)
    # Over the cap: none, not the first few.
    monkeypatch.setattr(km, "STAGED_RUN_BYTES", 4 * 128 * 70)
    assert plan("bigfusion.kas").kernels[0].arrays == []
    monkeypatch.setattr(km, "STAGED_RUN_BYTES", 4 * 128 * 71)
    assert plan("bigfusion.kas").kernels[0].arrays == big.kernels[0].arrays


def test_staged_soa_loads_count_in_the_cost_models_shared_memory():
    from irfuse.backend.cuda_emit import kernels_of
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.kernel.policies import array_words, staged_run_loads

    plan = compile_program(example("synctest.kas"), None, "f32", layout="soa")[0]
    kernel = kernels_of(plan.module)[0]
    model, _ = model_from_kernel(kernel, 4)
    assert [model.ops[i].kind for i in staged_run_loads(model)] == ["load"]
    assert array_words(model) == 9 * model.by == plan.kernels[0].arrays[0]
