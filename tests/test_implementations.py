"""Every implementation of every op: run on the CPU against the reference, compiled for sm_90 without spills."""

import os
import re

import numpy as np
import pytest

from irfuse.library.catalogue import default_library
from irfuse.library.catalogue import implementations
from irfuse.library.indexexpr import DefinitionError
from irfuse.driver.implementation_check import implementations_module, kernel_name, run_on_cpu
from irfuse.dialects.element_types import element_type, set_module_element_type
from irfuse.driver.compile import SPILL_BYTES_KEPT, build
from irfuse.verification.op_evaluation import evaluate

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "bigfusion.kas")
ALL = [i for op in default_library() for i in implementations(op)]


def test_every_op_has_the_mappings_where_they_differ():
    lib = default_library()
    names = {op.name: [i.name for i in implementations(op)] for op in lib}
    assert names["mmul33"] == ["elem", "row", "entry"]
    assert names["mvmul44"] == ["elem", "row"]  # rows and entries coincide for a vector result
    assert names["venorm3"] == ["elem"]
    # a result of three indices or more: also one thread a line along its first index, and,
    # for a contraction summing along its last axis (R[i,j,k] = sum(l) T[i,j,l] M[l,k]), a
    # line along that axis, offered where M is a table fixed when compiling
    assert names["ttmul3212"] == ["elem", "row", "entry", "line", "line2"]
    impl = implementations(lib.get("ttmul3212"))[2]
    assert impl.bx == 27 and impl.recommended_by * impl.bx <= 128
    assert [i.along_tables for i in implementations(lib.get("ttmul3212"))] == [False] * 4 + [True]
    assert not any(i.along_tables for op in lib for i in implementations(op) if i.name == "line" or
                   "delta" in op.definition)


def test_a_line_along_the_summed_axis_reads_its_operands_line_once():
    """`contract("jb,kba->kja", B, t)` (an 8x7 table and an 8x7x7 tensor): along j, thread (k, a)
    computes the 8 entries of its line from the 7 words t[k, :, a] and the whole table; along
    the first index, a thread reads 56 words of t for its 8 entries."""
    op = default_library().get("contract_jb_kba_kja_8x7_8x7x7")
    line, along = (next(i for i in implementations(op) if i.name == n) for n in ("line", "line1"))
    assert (line.bx, along.bx) == (56, 56) and along.along_tables and not line.along_tables
    assert line.operand_aps[1].words() == 56 and along.operand_aps[1].words() == 7
    assert along.operand_aps[0].words() == 56 and line.operand_aps[0].words() == 7
    assert sorted(along.result_ap.relative()) == [7 * j for j in range(8)]  # r[k, j, a] for j = 0..7
    # an element-wise op reads one word a result along any axis: no such line
    assert not any(i.along_tables for i in implementations(default_library().get("add_8x7x7_8x7x7")))


@pytest.mark.parametrize("names", [None, ("contract_kc_cba_kba_5x4_4x4x4", "contract_jb_kba_kja_5x4_5x4x4",
                                            "contract_ia_kja_kji_5x4_5x5x4", "contract_kji_kji_kji_5x5x5_5x5x5")])
def test_one_thread_an_element_takes_the_ops_own_expanded_entries(names):
    """The `elem` mapping's entries are the op's expanded trees (`OpDef.trees`) with their words
    as constant offsets: the same, entry by entry and offset by offset, as expanding the
    definition again with every index a constant (every op of the library, and the contractions
    of a high-order operator)."""
    import itertools

    from irfuse.library import implementations as impls
    from irfuse.library.indexexpr import parse_definition

    lib = default_library()
    ops = list(lib) if names is None else [lib.get(n) for n in names]
    for op in ops:
        d = parse_definition(op.definition)
        expander = impls._SymbolicExpander(op)
        again = [expander.expand(d.expr, dict(zip(d.target_indices, idx)))
                 for idx in itertools.product(*(range(n) for n in op.result_type.shape))]
        outputs = impls._derive(op, "elem").outputs
        assert [tree for _, tree in outputs] == again, op.name
        assert [off for off, _ in outputs] == [impls.Affine(const=k) for k in range(len(again))], op.name


def test_a_line_mapping_binds_every_index_but_the_first_to_the_threads():
    """`contract("kc,cba->kba", B, u)` of a 5x4 table and a 4x4x4 tensor: one thread a line
    (b, a), 16 threads, each computing the 5 entries k of its line from the 4 words of u on it."""
    op = default_library().get("contract_kc_cba_kba_5x4_4x4x4")
    line = next(i for i in implementations(op) if i.name == "line")
    assert line.bx == 16 and line.result_ap.words() == 5
    assert sorted(line.result_ap.relative()) == [0, 16, 32, 48, 64]
    assert sorted(line.operand_aps[1].relative()) == [0, 16, 32, 48]  # u[c, b, a] for c = 0..3



@pytest.mark.parametrize("name", ["reshape_5x5x5_125", "reshape_125_5x5x5", "reshape_7x8x8_448"])
def test_a_reshape_spreads_over_threads_that_read_their_words_directly(name):
    """A reshape's definition selects each entry by deltas of its indices (`delta(i0,0)*(...) +
    delta(i0,1)*(...)`); bound to a thread's coordinate, each such selection over every value of
    the coordinate is the one term at an offset affine in it, so the row, line and entry
    mappings exist (before: only one thread an element, every value tested at run time past
    `MAX_RUNTIME_SELECTIONS`) and read their words with no test: a gathered element of order 4
    (125 nodes) spread over 5 or 25 threads. Each agrees with the reference on the CPU."""
    op = default_library().get(name)
    impls = {i.name: i for i in implementations(op)}
    shape = op.result_type.shape
    assert set(impls) == {"elem", "row", "entry", "line"} if len(shape) == 3 else {"elem", "row", "line"}
    assert impls["row"].bx == shape[0]
    if len(shape) == 1:
        # the vector made of a 5x5x5 tensor: thread tx takes the words of the tensor's line tx,
        # k * 25 + tx for k = 0..4, on both sides (as the tensor's own line mapping holds them)
        lines = op.operand_types[0].shape[0]
        assert impls["line"].bx == shape[0] // lines
        for ap in (impls["line"].result_ap, impls["line"].operand_aps[0]):
            assert sorted(ap.relative()) == [k * (shape[0] // lines) for k in range(lines)]
    if len(shape) == 3:
        assert impls["line"].bx == shape[1] * shape[2] and impls["entry"].bx == op.result_type.size
        # the row of thread tx: the 25 words from tx*25 on, in order, on both sides
        assert sorted(impls["row"].operand_aps[0].relative()) == list(range(shape[1] * shape[2]))
    for impl in impls.values():
        assert " == " not in impl.device_source(), impl.name
    results = run_on_cpu(list(impls.values()), 37, seed=3, by=4)
    for impl in impls.values():
        got, want = results[kernel_name(impl)]
        np.testing.assert_array_equal(got, want, err_msg=impl.name)


def test_a_selection_folds_only_over_every_value_stepping_evenly():
    """The fold applies to a sum selecting, for every value of the thread's coordinate, terms
    alike but for offsets stepping evenly (`A[2-i]`: steps of -1 are even); a selection that
    misses a value or steps unevenly keeps its runtime tests. Every mapping agrees with the
    reference."""
    from irfuse.dialects.kas import VectorType

    lib = _private_library()
    cases = {"test_reverse3": ("C[i] = delta(i,0)*A[2] + delta(i,1)*A[1] + delta(i,2)*A[0]", False),
             "test_uneven3": ("C[i] = delta(i,0)*A[2] + delta(i,1)*A[0] + delta(i,2)*A[1]", True),
             "test_partial3": ("C[i] = delta(i,0)*A[0] + delta(i,1)*A[1]", True)}
    for name, (definition, tested) in cases.items():
        lib.define(name, [("A", VectorType(3))], VectorType(3), definition)
        row = next(i for i in implementations(lib.get(name)) if i.name == "row")
        assert (" == " in row.device_source()) == tested, name
    impls = [i for name in cases for i in implementations(lib.get(name))]
    for impl in impls:
        (got, want), = run_on_cpu([impl], 37, seed=4, library=lib).values()
        np.testing.assert_array_equal(got, want, err_msg=f"{impl.op.name}[{impl.name}]")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_implementation_matches_the_reference_on_the_cpu(dtype):
    # 37 elements: a partial last block for every recommended `by` above 1.
    results = run_on_cpu(ALL, 37, dtype=dtype, seed=5)
    assert len(results) == len(ALL)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for impl in ALL:
        got, want = results[kernel_name(impl)]
        assert (np.isnan(got) == np.isnan(want)).all(), impl.function_name  # sqrt of negatives: NaN in both
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=impl.function_name)


@pytest.mark.heavy
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_every_implementation_compiles_for_sm90_within_the_spills_kept(dtype):
    """Every implementation's kernel compiles for sm_90 without spills past `SPILL_BYTES_KEPT`
    under `build`'s policy (a kernel that spills more at its raised minimum of resident blocks is
    compiled again asking fewer). ptxas compiles each kernel on its own, so the kernels that spill in one compile
    of the whole module are built again by themselves, as `build` retries them: the same
    kernels, without compiling the other three quarters of the module a second time."""
    from irfuse.backend.compilers import compiler_for
    from irfuse.backend.cuda_emit import emit_module

    element = element_type(dtype)
    module = implementations_module(ALL)
    set_module_element_type(module, element)
    emitted = emit_module(module, element)
    cubin = compiler_for("cuda").compile(emitted.source, emitted.kernels, element, "sm_90")
    assert set(cubin.resources) == {kernel_name(i) for i in ALL}
    spilled = {k.name for k in emitted.kernels
               if cubin.resources[k.name].spill_stores + cubin.resources[k.name].spill_loads > SPILL_BYTES_KEPT}
    assert all(k.min_blocks > 1 for k in emitted.kernels if k.name in spilled), "spills with nothing to retry"
    again = implementations_module([i for i in ALL if kernel_name(i) in spilled])
    set_module_element_type(again, element)
    plan = build(again, compile_gpu=True, arch="sm_90")
    assert set(plan.cubin.resources) == spilled
    for k in plan.kernels:
        r = plan.cubin.resources[k.name]
        assert r.spill_stores + r.spill_loads <= SPILL_BYTES_KEPT, (k.name, r)


MDET = """
__device__ __forceinline__ void FUNC(int tx, int ty, const real_t* __restrict__ A, real_t* r)
{
  const real_t* a = A + APIN0;
  r[APOUT] = a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6])
           + a[2] * (a[3] * a[7] - a[4] * a[6]) SIGN;
}
"""
DET = ("r = A[0,0]*(A[1,1]*A[2,2]-A[1,2]*A[2,1]) - A[0,1]*(A[1,0]*A[2,2]-A[1,2]*A[2,0])"
       " + A[0,2]*(A[1,0]*A[2,1]-A[1,1]*A[2,0])")


def _private_library():
    """A library of its own with the default one's implementation checker: ops a test defines
    must not reach the process's default library, where every later test in the same
    process (an xdist worker runs hundreds) would see them (random programs drew them)."""
    from irfuse.library.catalogue import Library

    return Library(default_library().checker)


def _lib_with_det():
    from irfuse.dialects.kas import MatrixType, ScalarType

    lib = _private_library()
    lib.define("test_mdet33", [("A", MatrixType(3, 3))], ScalarType(), DET)
    return lib


def test_hand_written_implementation_is_checked_and_accepted():
    lib = _lib_with_det()
    impl = lib.implement("test_mdet33", "hand", 1, MDET.replace("SIGN", ""), [("ty*9", 1, 1, 9)], ("ty", 1, 1, 1))
    assert impl.origin == "hand-written"
    src = impl.device_source("sr")
    assert "void irf_test_mdet33_hand_sr(" in src and "A + (ty*9)" in src and "r[0]" in src
    (got, want), = run_on_cpu([impl], 50, library=lib).values()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    a = np.random.default_rng(0).uniform(-1, 1, (20, 3, 3))
    np.testing.assert_allclose(evaluate(lib.get("test_mdet33"), a), np.linalg.det(a), rtol=1e-12)


def test_hand_written_implementation_that_disagrees_is_refused():
    lib = _lib_with_det()
    with pytest.raises(DefinitionError, match="implementation 'wrong' of 'test_mdet33' disagrees with the definition"):
        lib.implement("test_mdet33", "wrong", 1, MDET.replace("SIGN", "* (real_t)1.5"),
                      [("ty*9", 1, 1, 9)], ("ty", 1, 1, 1))
    assert "wrong" not in [i.name for i in implementations(lib.get("test_mdet33"))]


def test_hand_written_implementation_that_does_not_compile_is_refused():
    lib = _lib_with_det()
    with pytest.raises(DefinitionError, match="does not compile"):
        lib.implement("test_mdet33", "broken", 1, "this is not C", [("ty*9", 1, 1, 9)], ("ty", 1, 1, 1))


def test_implement_argument_errors():
    lib = _lib_with_det()
    with pytest.raises(DefinitionError, match="unknown op"):
        lib.implement("nope", "x", 1, "", [], ("ty", 1, 1, 1))
    with pytest.raises(DefinitionError, match="gives 2 access patterns"):
        lib.implement("test_mdet33", "x", 1, "", [("ty*9", 1, 1, 9)] * 2, ("ty", 1, 1, 1))
    with pytest.raises(DefinitionError, match="already has an implementation 'elem'"):
        lib.implement("test_mdet33", "elem", 1, "", [("ty*9", 1, 1, 9)], ("ty", 1, 1, 1))


def test_delta_selects_in_every_implementation():
    """`delta(i, j)` selects: off-diagonal entries of smimulNN are exact zeros even for a NaN or
    infinite scalar, in the reference and in every thread mapping (the entry mapping decides
    the delta at run time and used to multiply NaN by 0)."""
    from irfuse.backend.compilers import compiler_for
    from irfuse.backend.cuda_emit import emit_module
    from irfuse.dialects.element_types import F32

    impls = [i for op in default_library() if op.name.startswith("smimul") for i in implementations(op)]
    assert {i.name for i in impls} >= {"elem", "row", "entry"}
    emitted = emit_module(implementations_module(impls), F32)
    host = compiler_for("cpu").compile(emitted.source, emitted.kernels, F32)
    s = np.array([np.nan, np.inf, -np.inf, 2.0, np.nan, 0.0, -1.0], dtype=np.float32)
    for impl in impls:
        n = impl.op.result_type.shape[0]
        got = np.full((len(s), n, n), 7.0, dtype=np.float32)
        host.launch(kernel_name(impl), [s, got], len(s))
        want = evaluate(impl.op, s.astype(np.float64))
        eye = np.eye(n, dtype=bool)
        assert np.all(got[:, ~eye] == 0.0), (impl.op.name, impl.name)
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=f"{impl.op.name}[{impl.name}]")


def _body(statement: str) -> str:
    return ("__device__ __forceinline__ void FUNC(int tx, int ty, const real_t* __restrict__ A, real_t* r)\n"
            "{\n  const real_t* a = A + APIN0;\n" + statement + "\n}\n")


@pytest.mark.parametrize("name, statement, message", [
    ("spins", "  volatile int k = 0; while (k == 0) { } r[APOUT] = a[0];", "does not finish within"),
    ("wild", "  for (long long i = 0; i < (1LL << 40); i += 4096) r[APOUT + i] = a[0];",
     "crashes when it runs (signal SIG"),
    # Right in float64, wrong in float32 (as code written for one precision can be).
    ("f64only", "  r[APOUT] = sizeof(real_t) == 8 ? a[0] : a[0] * (real_t)2;",
     "disagrees with the definition 'r = A[0,0]' in float32"),
])
def test_hand_written_implementations_that_hang_crash_or_fail_in_float32_are_refused(name, statement, message,
                                                                                     monkeypatch):
    """A kernel that loops forever or writes out of bounds is run in a child process with a time
    limit; one right in float64 only is caught by checking float32 too."""
    from irfuse.dialects.kas import MatrixType, ScalarType
    from irfuse.driver import implementation_check

    monkeypatch.setattr(implementation_check, "CHECK_TIME_LIMIT", 2.0)  # (the spinning kernel waits it out)

    lib = _private_library()
    lib.define("test_first", [("A", MatrixType(3, 3))], ScalarType(), "r = A[0,0]")
    with pytest.raises(DefinitionError, match=re.escape(message)):
        lib.implement("test_first", name, 1, _body(statement), [("ty*9", 1, 1, 9)], ("ty", 1, 1, 1))
    assert name not in [i.name for i in lib.implementations(lib.get("test_first"))]


def test_a_library_file_that_fails_is_named_with_its_line(tmp_path):
    """Every refusal of an op library, and any error of the file itself, is a diagnostic naming
    the user's file (and line), not a traceback."""
    import subprocess
    import sys

    cases = {
        "bad_def.py": ("from irfuse.dialects.kas import ScalarType\n\ndef register(library):\n"
                       "    library.define('x1', [('a', ScalarType())], ScalarType(), 'r = a +')\n",
                       "bad_def.py:4:1: error: op library refused:"),
        "bad_ap.py": ("from irfuse.dialects.kas import ScalarType\n\ndef register(library):\n"
                      "    library.define('x2', [('a', ScalarType())], ScalarType(), 'r = a')\n"
                      "    library.implement('x2', 'h', 1, '', [('q*2', 1, 1, 1)], ('ty', 1, 1, 1))\n",
                      "bad_ap.py:5:1: error: op library refused: access-pattern start 'q*2' uses 'q'"),
        "no_register.py": ("X = 1\n", "no_register.py: error: op library refused: a library file must define "
                                      "register(library)"),
        "syntax.py": ("def register(library)\n    pass\n", "syntax.py:1:22: error: invalid Python"),
        "raises.py": ("def register(library):\n    raise RuntimeError('boom')\n",
                      "raises.py:2:1: error: the op library raised RuntimeError: boom"),
    }
    for k, (name, (text, want)) in enumerate(cases.items()):
        path = tmp_path / name
        path.write_text(text)
        # (every command loads a library the same way: all three for the first file, `ops` for the others)
        commands = [["ops"]] if k else [["run", "--backend", "cpu", "--n", "4", EXAMPLE], ["ops"], ["plan", EXAMPLE]]
        for command in commands:
            p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", *command, "--library", str(path)],
                               capture_output=True, text=True)
            assert p.returncode == 1 and "Traceback" not in p.stderr, (name, command, p.stderr)
            assert want in p.stderr, (name, command, p.stderr)
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "ops", "--library", str(tmp_path / "nope.py")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "nope.py: error: cannot load the op library: no such file" in p.stderr
