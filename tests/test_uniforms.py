"""Batch-wide values: uniform inputs (one value for the whole batch), numeric literals, and
reductions over the batch fused into the kernels that make their operands. Every plan runs
on the CPU backend against the float64 reference, in both thread orders and both layouts;
reductions give the same bits run after run and whatever the threads' order."""

import os
import re

import numpy as np
import pytest
from conftest import LONG, ROOT

import irfuse
from irfuse.diagnostics import CompileError, SourceFile, UsageError
from irfuse.dialects import fuse, kas
from irfuse.dialects.layouts import from_aos
from irfuse.driver.compile import compile_text
from irfuse.frontend.irgen import compile_source
from irfuse.frontend.syntax import Number, parse_program
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.planner.cost import H100
from irfuse.planner.search import plan_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import (
    random_inputs,
    run_references,
    sum_depth,
    uniform_names,
)
from irfuse.verification.verify import check_outputs
from irfuse.testing.differential import Budget, check_source
from irfuse.testing.random_programs import random_program

ENERGY = """matrix3x3 A, F, G;
uniform matrix3x3 C, T, M;
uniform scalar s;
input A, C;
F = mmul33(A, C);
G = smmul33(F, -2.5e-1);
T = sum(G);
M = max(F);
return F, T, M;
"""
NORMALIZE = """vector3 v, w;
scalar s;
uniform scalar m, r, h;
input v;
s = venorm3(v);
m = max(s);
r = srcp(m);
h = smul(r, .5);
w = svmul3(v, h);
return w, m, h;
"""
MINIMUM = """scalar a, b; vector3 x; uniform scalar lo; uniform vector3 c, lowest;
input a, x, c;
b = smul(a, 3);
lo = min(b);
lowest = min(x);
x = vadd3(x, c);
return x, lo, lowest;
"""
PROGRAMS = {"energy": ENERGY, "normalize": NORMALIZE, "minimum": MINIMUM}


def _outputs(plan, inputs, n, layout, reverse=False):
    whole = uniform_names(plan.reference_program)
    given = {k: v if k in whole else from_aos(v, layout) for k, v in inputs.items()}
    got = Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(given, n).outputs
    if layout == "soa":
        got = {k: v if k in whole else np.moveaxis(v, -1, 0) for k, v in got.items()}
    return got


def _run(src: str, pipeline, layout: str, n: int, dtype: str = "f32"):
    """Compiles, runs on the CPU in both thread orders, checks every output; returns the plan
    and the outputs of the forward order."""
    plan, _ = compile_text(src, "u.kas", pipeline, dtype, compile_gpu=False, layout=layout)
    ref = plan.reference_program
    inputs = random_inputs(ref, n, 3, np.float64 if dtype == "f64" else np.float32)
    want = run_references(ref, inputs, dtype, n, plan.sum_by)
    runs = []
    for reverse in (False, True):
        got = _outputs(plan, inputs, n, layout, reverse)
        bad = [c.describe() for c in check_outputs(got, want, dtype) if not c.ok]
        assert not bad, (pipeline, layout, reverse, bad)
        runs.append(got)
    # The tree of a reduction is fixed: the threads' order changes no bit.
    for name in runs[0]:
        assert np.array_equal(runs[0][name], runs[1][name], equal_nan=True), name
    return plan, runs[0], inputs


# --- the language -------------------------------------------------------------------------


def test_literals_are_read_as_written():
    prog = parse_program(SourceFile("n.kas", "scalar a, b; input a;\nb = f(a, 2, 0.5, .25, 1e3, -2.5E-2, 7.);"
                                              "\nreturn b;"))
    numbers = [a for a in prog.statements[0].args if isinstance(a, Number)]
    assert [(n.text, n.value) for n in numbers] == [("2", 2.0), ("0.5", 0.5), (".25", 0.25), ("1e3", 1000.0),
                                                    ("-2.5E-2", -0.025), ("7.", 7.0)]
    assert [n.pos.col for n in numbers] == [10, 13, 18, 23, 28, 37]


def test_the_ir_holds_uniform_inputs_constants_and_reductions():
    program = kas.program_of(compile_source(ENERGY, "e.kas").module)
    assert program.uniform == ["C"]
    consts = [op for op in program.walk() if isinstance(op, kas.ConstantOp)]
    reduces = [op for op in program.walk() if isinstance(op, kas.ReduceOp)]
    assert [c.number for c in consts] == [-0.25]
    assert [(r.reduce_kind.value, r.res.name_hint) for r in reduces] == [("sum", "T"), ("max", "M")]
    assert all(kas.is_uniform(r.res) for r in reduces)
    calls = {op.res.name_hint: op for op in program.walk() if isinstance(op, kas.CallOp)}
    assert not kas.is_uniform(calls["F"].res)  # a per-element operand makes a per-element value
    # The IR prints and reads back the same.
    text = str(program)
    assert "uniform(C)" in text and "kas.constant -0.25" in text and "kas.reduce sum %G" in text


@pytest.mark.parametrize("src, where, message", [
    ("scalar a; uniform scalar t; input a;\nt = ssqrt(a);\nreturn t;", "2:1",
     "'t' is uniform, but 'ssqrt' of the per-element 'a' gives one value per element"),
    ("scalar a, t; uniform scalar c; input a, c;\nt = sabs(c);\nreturn t;", "2:1",
     "'sabs' of uniform operands only: its value is one for the whole batch, but 't' is per-element"),
    ("scalar a, t; input a;\nt = sum(a);\nreturn t;", "2:1",
     "'sum' reduces over the batch: its value is one for the whole batch, but 't' is per-element"),
    ("scalar a; uniform scalar c, t; input a, c;\nt = max(c);\nreturn t;", "2:9",
     "'max' reduces a per-element value over the batch, but 'c' is uniform"),
    ("scalar a; uniform scalar t; input a;\nloop 2 { t = sum(a); }\nreturn t;", "2:14",
     "'sum' cannot be inside a loop"),
    ("scalar a; uniform scalar c, t; input a, c;\nloop 2 { t = sabs(c); }\nreturn a;", "2:10",
     "'t' is uniform and cannot be assigned inside a loop"),
    ("vector3 a; uniform vector3 t; input a;\nt = sum(a, a);\nreturn t;", "2:5",
     "'sum' takes 1 operand (the per-element value to reduce over the batch), got 2"),
    ("vector3 a; uniform scalar t; input a;\nt = min(a);\nreturn t;", "2:1",
     "'min' of 'a' is vector3, but 't' is declared scalar"),
    ("vector3 a, b; input a;\nb = vadd3(a, 1.5);\nreturn b;", "2:14",
     "operand 2 of 'vadd3' must be vector3, but the number 1.5 is a scalar"),
    ("scalar a; uniform scalar t; input a;\nt = sum(2);\nreturn t;", "2:9",
     "'sum' reduces a per-element value over the batch, not the number 2"),
    ("scalar a, b; input a;\nb = smul(a, 1.5.2);\nreturn b;", "2:16",
     "unexpected character '.' in the number '1.5'"),
    ("scalar a, b; input a;\nb = smul(a, 1e);\nreturn b;", "2:14",
     "unexpected character 'e' in the number '1'"),
    ("scalar a, b; input a;\nb = smul(a, -x);\nreturn b;", "2:14", "expected a number after '-', found 'x'"),
    ("uniform input a;\nreturn a;", "1:9", "expected a type after 'uniform', found 'input'"),
])
def test_misused_uniform_values_are_errors_at_their_line(src, where, message):
    with pytest.raises(CompileError) as e:
        compile_source(src, "u.kas")
    text = str(e.value)
    assert f"u.kas:{where}: error: {message}" in text, text


def test_an_error_in_a_uniform_statement_is_reported_once():
    """A statement that reads a variable whose assignment failed is not reported again, and
    nor is a later use of its own target."""
    src = "vector3 x, s; scalar v; uniform scalar c, d; input x, c;\nd = sdiv(c, v);\ns = svmul3(x, d);\nreturn s;"
    with pytest.raises(CompileError) as e:
        compile_source(src, "u.kas")
    assert str(e.value).count("error:") == 1 and "'v' is used before it is assigned" in str(e.value)


# --- kernels ------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("pipeline", [None, "kas-dce,fuse-each"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_with_batch_wide_values_match_the_reference(name, pipeline, layout):
    _run(PROGRAMS[name], pipeline, layout, 1000)


# Sums and maxima of one word an element, one element a thread (blocks of 128 elements, as
# ENERGY's): past a combine block's threads the batch sizes test the combine's tree, whose
# check ENERGY's 3x3 products would make ten times as long (its float64 references over two
# million elements).
WORD_REDUCTIONS = """scalar a, b;
uniform scalar T, M;
input a;
b = sneg(a);
T = sum(b);
M = max(a);
return T, M;
"""


@pytest.mark.parametrize("n", [1, 2, 127, 129, 1024 * 128 + 3, 2 * 8192 * 128 + 3])
def test_reductions_over_awkward_batch_sizes(n):
    """One element, a partial last block, more partials than a combine block's threads and than
    the combine kernel's lanes (each lane combining several)."""
    if n < 1024 * 128:
        _run(ENERGY, None, "aos", n, "f64")
        return
    # (one kernel a call, 128 elements a block: the search would make larger blocks here)
    plan, _, _ = _run(WORD_REDUCTIONS, DEFAULT_PIPELINE.replace("fuse-partition", "fuse-each{by=128}"),
                      "aos", n, "f64")
    partials = [k.blocks(n) for k in plan.kernels if not k.name.startswith("irf_combine")]
    assert partials and min(partials) > (n - 3) // 128  # every block 128 elements at most


def test_a_reduction_is_fused_into_the_kernel_that_makes_its_operand():
    plan, _, _ = _run(ENERGY, None, "aos", 300)
    kernels = [k for k in plan.module.ops if isinstance(k, fuse.KernelOp)]
    assert len(kernels) == 1
    stores = [op for op in kernels[0].walk() if isinstance(op, fuse.StoreOp)]
    assert sorted((s.reduce_kind.value if s.reduce_kind else "") for s in stores) == ["", "max", "sum"]
    combines = [op for op in plan.module.walk() if isinstance(op, fuse.CombineOp)]
    assert sorted(c.reduce_kind.value for c in combines) == ["max", "sum"]
    # C is read whole by every element: a uniform input of the kernel, in the uniform place.
    loads = {op.source.name_hint: op for op in kernels[0].walk() if isinstance(op, fuse.LoadOp)}
    assert loads["C"].place.is_uniform and not loads["A"].place.is_uniform
    assert kernels[0].input_args.index(loads["C"].source) in kernels[0].uniform_positions


def test_a_statement_reading_a_reduction_runs_in_a_later_kernel_and_uniform_statements_once():
    plan, got, inputs = _run(NORMALIZE, None, "aos", 777)
    kernels = {k.sym_name.data: k for k in plan.module.ops if isinstance(k, fuse.KernelOp)}
    once = [k for k in kernels.values() if k.runs_once]
    assert [[op.op_name for op in k.walk() if isinstance(op, fuse.CallOp)] for k in once] == [["srcp", "smul"]]
    reducing = [k for k in kernels.values() if any(isinstance(op, fuse.StoreOp) and op.reduce for op in k.walk())]
    reading = [k for k in kernels.values() if any(isinstance(op, fuse.CallOp) and op.op_name == "svmul3"
                                                  for op in k.walk())]
    assert len(reducing) == 1 and len(reading) == 1 and reducing != reading
    norms = np.sqrt((inputs["v"].astype(np.float64) ** 2).sum(axis=1))
    assert got["m"] == np.float32(norms.max())  # a maximum is exact
    assert np.allclose(got["w"], inputs["v"] * (0.5 / norms.max()), rtol=1e-5)


def test_the_planner_counts_no_traffic_per_element_for_uniform_inputs():
    """A kernel reading a shared 6x6 matrix moves the bytes of its per-element arrays only."""
    src = open(f"{ROOT}/examples/strain_energy.kas").read()
    program = kas.program_of(compile_source(src, "s.kas").module)
    plan = plan_program(program, 1 << 20, H100)[1][0]
    (config,) = plan.configs
    per_element = (6 + 1 + 6 + 1) * 4  # eps, vol in; sig, e out: C and U are batch-wide
    assert config.cost.bytes == (1 << 20) * per_element


def test_reductions_give_the_same_bits_every_run():
    plan, _ = compile_text(ENERGY, "e.kas", None, "f32", compile_gpu=False)
    inputs = random_inputs(plan.reference_program, 5000, 9, np.float32)
    first = _outputs(plan, inputs, 5000, "aos")
    for k in range(20):
        again = _outputs(plan, inputs, 5000, "aos", reverse=bool(k % 2))
        for name in ("T", "M"):
            assert np.array_equal(first[name], again[name]), (k, name)


def test_the_sum_allowance_grows_with_the_batch_and_catches_a_lost_element():
    assert sum_depth(100, 128) < sum_depth(10 ** 7, 128) < sum_depth(10 ** 7, 1)
    src = "scalar a; uniform scalar t; input a;\nt = sum(a);\nreturn t;"
    plan, _ = compile_text(src, "s.kas", None, "f32", compile_gpu=False)
    inputs = random_inputs(plan.reference_program, 4000, 2, np.float32)
    want = run_references(plan.reference_program, inputs, "f32", 4000, plan.sum_by)
    got = _outputs(plan, inputs, 4000, "aos")
    assert all(c.ok for c in check_outputs(got, want, "f32"))
    dropped = {"t": np.float32(got["t"] - inputs["a"][1234])}  # one element missing from the sum
    (check,) = check_outputs(dropped, want, "f32")
    assert not check.ok


def test_a_reduction_in_float64_matches_numpy_closely():
    plan, got, inputs = _run(ENERGY, None, "aos", 3001, "f64")
    want = 0.25 * -np.einsum("nij,jk->ik", inputs["A"], inputs["C"])
    assert np.allclose(got["T"], want, rtol=1e-12, atol=1e-12)


# --- runtime and API ----------------------------------------------------------------------


def test_npz_inputs_take_uniform_values_without_a_batch_axis(tmp_path):
    from irfuse.verification.reference import load_inputs

    program = kas.program_of(compile_source(ENERGY, "e.kas").module)
    path = tmp_path / "in.npz"
    np.savez(path, A=np.ones((5, 3, 3)), C=np.eye(3))
    got = load_inputs(str(path), program, np.float32)
    assert got["C"].shape == (3, 3) and got["A"].shape == (5, 3, 3)
    np.savez(path, A=np.ones((5, 3, 3)), C=np.ones((5, 3, 3)))
    with pytest.raises(UsageError, match=r"input 'C' has shape \(5, 3, 3\); it is a uniform matrix3x3 .* \(3, 3\)"):
        load_inputs(str(path), program, np.float32)


def test_the_python_api_takes_and_gives_uniform_values():
    p = irfuse.compile(ENERGY, backend="cpu")
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (2000, 3, 3)).astype(np.float32)
    C = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
    out = p(A, C, verify=True)
    assert out.T.shape == (3, 3) and out.M.shape == (3, 3) and out.F.shape == (2000, 3, 3)
    soa = p(np.ascontiguousarray(np.moveaxis(A, 0, -1)), C, verify=True)
    assert soa.F.shape == (3, 3, 2000) and np.array_equal(soa.T, out.T)
    target = np.empty((3, 3), np.float32)
    p(A, C, out={"T": target})
    assert np.array_equal(target, out.T)
    assert p.check(A, C).ok
    with pytest.raises(UsageError, match=r"input 'C' has shape \(2000, 3, 3\); it holds one value for the whole "
                                         r"batch \(it is uniform\), shaped \(3, 3\)"):
        p(A, A)
    # In chunks of whole reducing blocks (passes over them): the bits of one call.
    with pytest.raises(UsageError, match="cannot hold 128 elements in each of 2 lanes"):
        p(A, C, memory_budget=10_000)
    chunked = p(A, C, memory_budget=100_000)
    assert p.last_chunks > 1
    for k in p.outputs:
        assert np.array_equal(chunked[k], out[k]), k
    assert np.array_equal(p(A, C, memory_budget=10 ** 8).T, out.T)


def test_a_uniform_input_goes_whole_to_every_chunk():
    src = "vector3 x, y; uniform vector3 c; input x, c;\ny = vadd3(x, c);\nreturn y;"
    p = irfuse.compile(src, backend="cpu")
    x = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    c = np.array([1, 2, 3], np.float32)
    y = p(x, c, memory_budget=6000).y
    assert p.last_chunks > 1 and np.array_equal(y, x + c)


def test_the_cli_runs_and_verifies_the_examples_with_uniform_values(tmp_path):
    import subprocess
    import sys

    for name in ("strain_energy", "cfl_step"):
        out = tmp_path / f"{name}.npz"
        p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", f"{ROOT}/examples/{name}.kas",
                            "--backend", "cpu", "--n", "2000", "--save", str(out)], capture_output=True, text=True)
        assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
        saved = np.load(out)
        assert saved["U" if name == "strain_energy" else "dt"].shape == ()


# --- random programs ----------------------------------------------------------------------


# (`IRFUSE_FUZZ_LONG=1` runs 20; benchmarks/fuzz.py runs such programs in the thousands)
@pytest.mark.parametrize("seed", range(20 if LONG else 4))
def test_random_programs_with_batch_wide_values_agree_with_the_reference(seed, tmp_path):
    """Uniform inputs, literals, reductions (and kernels after them), statements run once:
    the two best plans of random programs, against the reference on the CPU, each compiled
    to sm_90 with NVRTC too, and each run in chunks too (passes over them where it reduces)
    with the bits of one call."""
    src = random_program(seed, 10, batch_wide=True)
    out = check_source(src, Budget(top=2, n=301, seed=seed, nvrtc=True, chunks=True), str(tmp_path))
    assert out.ok, (src, out.failure, out.detail)


@pytest.mark.parametrize("seed", [102, 103])
def test_random_batch_wide_programs_in_float64(seed, tmp_path):
    """float64 doubles every staged value's shared memory: these programs' plans sum or take
    the maximum of 27-word tensors over 128 elements, whose staging beside the planned
    buffer passed the static limit (the emitter refused the kernels the planner had chosen)."""
    src = random_program(seed, 14, batch_wide=True)
    out = check_source(src, Budget(top=2, dtype="f64", n=37, seed=seed, nvrtc=True), str(tmp_path))
    assert out.ok, (src, out.failure, out.detail)
    assert "tensor3x3x3" in src and re.search(r"= (sum|max|min)\(", src)


def test_the_random_programs_reach_every_batch_wide_form():
    text = "\n".join(random_program(seed, 12, batch_wide=True) for seed in range(30))
    for form in ("uniform scalar", "uniform matrix3x3", "= sum(", "= max(", "= min(", "0.5", "-1.25", "3e-1"):
        assert form in text, form
    programs = [compile_source(random_program(seed, 12, batch_wide=True), "r.kas").module for seed in range(30)]
    assert sum(any(isinstance(op, kas.ReduceOp) for op in m.walk()) for m in programs) > 10
    # A statement of uniform values only, and a per-element statement that reads a reduction.
    once = reads = 0
    for m in programs:
        for op in m.walk():
            if isinstance(op, kas.CallOp):
                once += kas.is_uniform(op.res)
                reads += not kas.is_uniform(op.res) and any(isinstance(a.owner, kas.ReduceOp) for a in op.args)
    assert once and reads


def test_tune_times_and_verifies_plans_of_programs_with_batch_wide_values(tmp_path):
    import json
    import subprocess
    import sys

    for name, layout in (("strain_energy", "aos"), ("cfl_step", "soa")):
        out = tmp_path / f"{name}.json"
        p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "tune", f"{ROOT}/examples/{name}.kas",
                            "--backend", "cpu", "--top", "2", "--n", "3000", "--repeat", "2", "--rounds", "1",
                            "--layout", layout, "--json", str(out)], capture_output=True, text=True, cwd=tmp_path)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        result = json.loads(out.read_text())
        assert result["plans"] and all(plan["verified"] for plan in result["plans"])


def test_a_literal_in_a_loop_is_hoisted_and_the_loop_runs_in_a_kernel():
    """Literals live in the program's own block (one op per value), so a loop whose body uses
    them still holds calls only: the default plan runs it inside a kernel; the host-loop plan
    uploads each literal once, not once per iteration."""
    from irfuse.passes.registry import partition_pipeline

    src = "vector3 x; scalar s;\ninput x;\nloop 3 { x = svmul3(x, 0.5); s = vdot3(x, x); x = svmul3(x, -2); }\nreturn x, s;"
    program = kas.program_of(compile_source(src, "l.kas").module)
    assert [op.number for op in program.body.block.ops if isinstance(op, kas.ConstantOp)] == [0.5, -2.0]
    plan, _, _ = _run(src, None, "aos", 300)
    assert any(isinstance(op, fuse.LoopOp) for op in plan.module.walk())
    host, _, _ = _run(src, partition_pipeline(1, 0, 8, 1 << 22, "h100", loops="host"), "aos", 300)
    assert "kas.loop" in str(host.module)


def test_uniformity_is_remembered_only_inside_the_memo_and_gives_the_same_answers():
    from irfuse.dialects import kas
    from irfuse.frontend.irgen import compile_source

    program = kas.program_of(compile_source(
        "uniform matrix3x3 C, D; matrix3x3 A, K; vector3 x, v; scalar e; uniform scalar E, m;\n"
        "input A, C, x; D = mmul33(C, C); K = mmul33(A, D); v = mvmul33(K, x); e = vdot3(v, x);\n"
        "E = sum(e); m = smul(E, E); return m, v;", "memo.kas").module)
    values = [r for op in program.walk() for r in op.results] + list(program.body.block.args)
    plain = [kas.is_uniform(v) for v in values]
    assert any(plain) and not all(plain)
    assert kas.uniform_memo() is None
    with kas.uniformity_memo() as memo:
        assert [kas.is_uniform(v) for v in values] == plain
        assert len(memo) == len(set(values)) and kas.uniform_memo() is memo
    assert kas.uniform_memo() is None


def test_uniformity_of_a_long_chain_looks_at_each_value_once():
    """Asked of every value of a chain of 600 calls in one memo, the answers are the plain
    walk's and each leaf (input, literal) is looked at once: a value deep in the chain asked
    again and again is not walked again (which made verifying a long unrolled derivative
    quadratic), also where a uniform operand meets a per-element one at the chain's end."""
    from irfuse.dialects import kas
    from irfuse.frontend.irgen import compile_source

    body = "".join("s = sadd(s, s); t = smul(t, 2.0);\n" for _ in range(300))
    program = kas.program_of(compile_source(
        f"scalar x, s, y; uniform scalar h, t; input x, h;\ns = smul(x, x); t = sadd(h, h);\n{body}"
        "y = sadd(s, t); return y, t;", "chain.kas").module)
    values = [r for op in program.walk() for r in op.results] + list(program.body.block.args)
    plain = [kas.uniform_leaf(v, ()) if not isinstance(v.owner, kas.CallOp) else None for v in values]
    looked: list = []

    def leaf(v):
        looked.append(v)
        return kas.uniform_leaf(v, ())

    memo: dict = {}
    answers = [kas.uniform_through_calls(v, leaf, memo) for v in values]
    assert answers == [kas.is_uniform(v) for v in values]
    constants = sum(isinstance(v.owner, kas.ConstantOp) for v in values)
    assert constants and sum(answers) == 301 + constants + 1  # t's chain, the literals, h; not x, s, y
    assert len(looked) == len(set(looked)) == sum(p is not None for p in plain)


# Uniform scalars given as numbers -------------------------------------------------------------

SCALED = "vector3 x, y; uniform scalar h, k; input x, h, k;\ny = svmul3(x, h);\ny = svmul3(y, k);\nreturn y;"


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_uniform_scalars_given_as_numbers_give_the_bits_of_arrays(dtype):
    """Python numbers, NumPy scalars of either precision and 0-d arrays are converted to the
    program's element type: the bits of a call on 0-d arrays of that type."""
    prog = irfuse.compile(SCALED, backend="cpu", dtype=dtype)
    t = prog.dtype.type
    x = np.random.default_rng(0).standard_normal((257, 3)).astype(prog.dtype)
    want = prog(x, np.array(t(0.1)), np.array(t(3))).y
    for h, k in [(0.1, 3), (np.float64(0.1), np.int64(3)), (np.float32(0.1) if dtype == "f32" else 0.1, 3.0),
                 (np.array(0.1), np.array(3, dtype=np.int32))]:
        assert prog(x, h, k=k).y.tobytes() == want.tobytes(), (h, k)
    assert prog.check(x, 0.1, 3).ok


@pytest.mark.parametrize("value, message", [
    (1e300, r"input 'h' is 1e\+300, beyond the float32 range"),
    (-1e39, r"input 'h' is -1e\+39, beyond the float32 range"),
    (True, r"input 'h' is a bool"),
    (1 + 2j, r"input 'h' is a complex number"),
    (np.complex64(1), r"input 'h' holds a complex64 value"),
    ("0.5", r"input 'h' is a str, not an array"),
    (np.array([0.5]), r"input 'h' has shape \(1,\)"),
])
def test_a_uniform_scalar_that_does_not_fit_is_refused_by_name(value, message):
    prog = irfuse.compile(SCALED, backend="cpu")
    x = np.ones((4, 3), np.float32)
    with pytest.raises(UsageError, match=message):
        prog(x, value, 1.0)


def test_a_number_for_a_uniform_vector_is_refused():
    prog = irfuse.compile("vector3 x, y; uniform vector3 c; input x, c;\ny = vadd3(x, c);\nreturn y;", backend="cpu")
    with pytest.raises(UsageError, match=r"input 'c' is a float, not an array"):
        prog(np.ones((4, 3), np.float32), 1.0)


def test_a_program_over_a_mesh_takes_numbers_for_its_uniform_scalars():
    """The P1 residual's Lame parameters as Python numbers: the bits of float32 scalars."""
    from irfuse.mesh import Connectivity, box_tetrahedra

    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cpu")
    X, conn = box_tetrahedra(3, numbering="random")
    X = X.astype(np.float32)
    u = (1e-3 * np.random.default_rng(1).standard_normal(X.shape)).astype(np.float32)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    c = Connectivity(conn, len(X))
    want = prog(X, u, c, dN, np.float32(1.5), np.float32(0.75))
    got = prog(X, u, c, dN, 1.5, 0.75)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(want, got))
