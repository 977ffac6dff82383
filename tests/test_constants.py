"""Uniform inputs fixed when compiling (`irfuse.compile(..., constants=...)`): the program's
`kas.table`s in place of the inputs, the kernels' constant arrays, the calls without them,
and what is refused."""

import os
import pickle
import re
import sys

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "highorder"))
import operators  # noqa: E402 -- examples/highorder/operators.py: the bake-off's programs

import highorder_reference as ref  # noqa: E402 -- tests/highorder_reference.py

SOURCE = """uniform matrix3x3 M;
uniform scalar c;
matrix3x3 e, s;
input e, M, c;
s = mmul(e, M);
s = scale(s, c);
return s;
"""


def _scaled_product(e: irfuse.Matrix[3, 3], M: irfuse.Uniform[irfuse.Matrix[3, 3]]):
    s = e @ M
    return s


def _inputs(rng, n=300):
    return rng.standard_normal((n, 3, 3)), rng.standard_normal((3, 3)), np.float64(rng.standard_normal())


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_fixed_inputs_leave_the_call_and_give_the_bits_of_passing_them(dtype):
    e, M, c = _inputs(np.random.default_rng(0))
    plain = irfuse.compile(SOURCE, backend="cpu", dtype=dtype)
    fixed = irfuse.compile(SOURCE, backend="cpu", dtype=dtype, constants={"M": M, "c": c})
    partly = irfuse.compile(SOURCE, backend="cpu", dtype=dtype, constants={"M": M.ravel().tolist()})
    assert fixed.inputs == ("e",) and partly.inputs == ("e", "c")
    t = np.float32 if dtype == "f32" else np.float64
    want = plain(e=e.astype(t), M=M.astype(t), c=t(c))["s"]
    assert np.array_equal(fixed(e=e.astype(t))["s"], want)
    assert np.array_equal(partly(e=e.astype(t), c=t(c))["s"], want)
    with pytest.raises(UsageError, match="unknown input 'M'"):
        fixed(e=e.astype(t), M=M.astype(t))
    # other numbers, another program (the cache keys on them)
    other = irfuse.compile(SOURCE, backend="cpu", dtype=dtype, constants={"M": 2 * M, "c": c})
    assert np.array_equal(other(e=e.astype(t))["s"], plain(e=e.astype(t), M=(2 * M).astype(t), c=t(c))["s"])
    # a program unpickled (a Dask worker's) compiles again with the same numbers
    again = pickle.loads(pickle.dumps(fixed))
    assert again.inputs == ("e",) and np.array_equal(again(e=e.astype(t))["s"], want)


@pytest.mark.parametrize("constants, message", [
    ({"N": np.eye(3)}, "no input 'N'"),
    ({"e": np.eye(3)}, "'e' is not a uniform input"),
    ({"M": np.eye(2)}, r"constants\['M'\] is shaped \(2, 2\); 'M' is a"),
    ({"M": np.full((3, 3), np.nan)}, "not finite"),
    ({"M": np.array([["a"] * 3] * 3)}, "not real numbers"),
    ({"M": []}, "is empty"),
    ([("M", np.eye(3))], "maps uniform input names"),
    ({"c": 1e39}, r"constants\['c'\] holds 1e\+39, beyond the float32 range .*compiled for float32"),
])
def test_bad_constants_are_refused_by_name(constants, message):
    with pytest.raises(UsageError, match=message):
        irfuse.compile(SOURCE, backend="cpu", constants=constants)


def test_numbers_beyond_the_element_type_are_refused_where_written():
    """A literal or a fixed value past float32's range would be the kernels' infinity; the same
    number given at a call is refused, and so it is when compiling (float64 takes it)."""
    src = "scalar x, y;\ninput x;\ny = smul(x, -1e39);\nreturn y;\n"
    with pytest.raises(irfuse.CompileError, match=r"<source>:3:13: error: the number is -1e\+39, beyond the float32 "
                                                  r"range \(largest 3.4028235e\+38\)"):
        irfuse.compile(src, backend="cpu", dtype="f32")
    y = irfuse.compile(src, backend="cpu", dtype="f64")(np.ones(2)).y
    assert np.array_equal(y, [-1e39, -1e39])
    assert np.isfinite(irfuse.compile(src.replace("-1e39", "3.4e38"), backend="cpu")(np.ones(2, np.float32)).y).all()
    with pytest.raises(UsageError, match="beyond the float32 range"):
        irfuse.compile(SOURCE, backend="cpu")(np.ones((2, 3, 3), np.float32), np.eye(3, dtype=np.float32), 1e39)


@pytest.mark.parametrize("fixed", [True, False])
def test_a_float32_programs_numbers_are_checked_as_its_kernels_read_them(fixed):
    """sqrt(x - c) with c = 0.7 fixed when compiling (or the literal 0.7) in float32, at x the
    float32 of 0.7 (below 0.7): the kernels read c's float32, so x - c is 0 and the result 0.
    The check (`verify=True`, the differential tests' reference) took c in float64, x - c a
    negative number and its square root NaN, and refused the right result (found by the
    fuzzer: random program seed 730003, its float32 plan with the uniform input fixed)."""
    src = "scalar x, y; uniform scalar c;\ninput x, c;\ny = ssub(x, c);\ny = ssqrt(y);\nreturn y;\n"
    if fixed:
        prog = irfuse.compile(src, backend="cpu", dtype="f32", constants={"c": 0.7})
    else:
        prog = irfuse.compile(src.replace("input x, c;", "input x;").replace("ssub(x, c)", "ssub(x, 0.7)"),
                              backend="cpu", dtype="f32")
    x = np.array([0.7, 0.9, 0.2], np.float32)
    got = prog(x, verify=True).y
    assert got[0] == 0 and got[1] == np.sqrt(np.float32(0.9) - np.float32(0.7)) and np.isnan(got[2])


def test_an_index_input_cannot_be_fixed():
    src = "nodal scalar u, y;\nindex4 conn;\nvector4 ue;\ninput u, conn;\nue = gather(u, conn);\ny = scatter(ue, conn);\nreturn y;\n"
    with pytest.raises(UsageError, match="'conn' is an index input"):
        irfuse.compile(src, backend="cpu", constants={"conn": np.zeros(4)})


def test_the_bake_off_tables_as_constants_take_lines_along_the_summed_axes():
    """BK3 at order 3 as the GPU plans it (h100 profile), run on the CPU backend: with B and D
    fixed, its middle contractions take a line along the axis they sum (`line1`, `line2`),
    their tables constant arrays of the module, and give the bits of the program that takes
    them as inputs (each sum in the same order); NVRTC compiles the kernel, its tables
    `__constant__` arrays and no block copy of them."""
    p, q = 3, 5
    B, D, _ = ref.lagrange_tables(p, q)
    src = operators.bk3_source(p, q)
    fixed = irfuse.compile(src, backend="cpu", profile="h100", dtype="f64", filename="bk3_p3.kas",
                           constants={"B": B, "D": D})
    plain = irfuse.compile(src, backend="cpu", profile="h100", dtype="f64", filename="bk3_p3.kas")
    mappings = set(re.findall(r"\[(line\d*)\] into", fixed.artifact.source))
    assert {"line1", "line2"} <= mappings and not {"line1", "line2"} & set(
        re.findall(r"\[(line\d*)\] into", plain.artifact.source))
    rng = np.random.default_rng(3)
    args = {"ue": rng.standard_normal((40, p + 1, p + 1, p + 1)),
            **{g: rng.standard_normal((40, q, q, q)) for g in ("gxx", "gxy", "gxz", "gyy", "gyz", "gzz")}}
    got = fixed(**args)[fixed.outputs[0]]
    assert np.array_equal(got, plain(**args, B=B, D=D)[plain.outputs[0]])
    gpu = irfuse.compile(src, backend="cuda", arch="sm_90", dtype="f64", filename="bk3_p3.kas",
                         constants={"B": B, "D": D})
    text = gpu.artifact.source
    kernel = text[text.index('extern "C" __global__'):]
    kernel = kernel[:kernel.index("\n}\n")]
    assert re.search(r"__constant__ real_t irf_t_bk3_p3_\w+_0\[20\] = \{\(real_t\)", text)
    assert "irf_u0" not in kernel and "g_B[" not in kernel and gpu.artifact.cubin is not None


def test_a_staged_program_over_a_mesh_takes_its_fixed_inputs_in_each_pass():
    """The explicit step (passes over the elements and the nodes) with its four uniform inputs
    fixed: the passes read the tables where they read the inputs, and the step gives the bits
    of passing them."""
    from irfuse.mesh import box_tetrahedra

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "mesh", "explicit_step.kas")
    X, conn = box_tetrahedra(3)
    rng = np.random.default_rng(1)
    n = len(X)
    args = dict(X=X, u=rng.standard_normal((n, 3)) * 1e-3, v=rng.standard_normal((n, 3)), m=rng.uniform(1, 2, n),
                conn=conn)
    fixed_values = {"dN": np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float), "lam": 1.0, "mu": 0.5,
                    "dt": 1e-3}
    plain = irfuse.compile(path, backend="cpu", dtype="f64")
    fixed = irfuse.compile(path, backend="cpu", dtype="f64", constants=fixed_values)
    assert fixed.inputs == ("X", "u", "v", "m", "conn")
    want, got = plain(**args, **fixed_values), fixed(**args)
    for name in plain.outputs:
        assert np.array_equal(np.asarray(got[name]), np.asarray(want[name])), name


def test_a_python_function_takes_constants_as_a_kas_program_does():
    """A program written as a Python function (`irfuse.frontend.python`), its uniform matrix fixed."""
    src_fn = irfuse.program(_scaled_product)
    e, M, _ = _inputs(np.random.default_rng(2))
    plain = irfuse.compile(src_fn, backend="cpu", dtype="f64")
    fixed = irfuse.compile(src_fn, backend="cpu", dtype="f64", constants={"M": M})
    assert "M" not in fixed.inputs
    assert np.array_equal(fixed(e=e)[fixed.outputs[0]], plain(e=e, M=M)[plain.outputs[0]])
