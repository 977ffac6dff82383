"""The Python API (`irfuse.compile`, `Program`) on NumPy arrays, on the CPU backend."""

import os
import warnings
import zlib

import pickle

import numpy as np
import pytest

import irfuse
from xdsl.dialects.builtin import ModuleOp
from conftest import EXAMPLES
from irfuse.verification.reference import random_inputs, run_references
from irfuse.verification.verify import check_outputs


def example(name: str) -> str:
    return next(p for p in EXAMPLES if os.path.basename(p) == name)


@pytest.fixture(scope="module")
def synctest():
    return irfuse.compile(example("synctest.kas"), backend="cpu")


@pytest.fixture(scope="module")
def stvenant():
    return irfuse.compile(example("stvenant.kas"), backend="cpu")


def test_a_program_says_what_it_takes_and_gives(stvenant):
    assert stvenant.inputs == ("ten4help1", "mat33helpf", "vec3dphi", "mat33help1", "vecquadweightssums")
    assert stvenant.outputs == ("ten3help2", "vec3nodestiff")
    assert stvenant.shapes["ten4help1"] == (3, 3, 3, 3) and stvenant.shapes["vecquadweightssums"] == ()
    assert stvenant.dtype == np.float32 and stvenant.backend == "cpu"
    assert "stvenant(ten4help1" in repr(stvenant) and stvenant.kernels


# Every example in float32; in float64 three whose programs differ in kind (a loop, a
# reduction, element code): what the API adds for float64 is the element type's plumbing,
# the same for every program (every example runs in float64 against the reference in
# test_backend_cpu, compiled for sm_90 too).
F64_API_CASES = ("power_iteration.kas", "cfl_step.kas", "neo_hookean.kas")
API_CASES = [(os.path.basename(p), "f32") for p in EXAMPLES] + [
    (os.path.basename(p), "f64") for p in EXAMPLES if os.path.basename(p) in F64_API_CASES]


@pytest.mark.parametrize("name, dtype", API_CASES)
def test_every_example_through_the_api_matches_the_reference(name, dtype):
    prog = irfuse.compile(example(name), backend="cpu", dtype=dtype)
    ref = prog.compiled.reference_program
    inputs = random_inputs(ref, 301, 7, prog.dtype)
    out = prog(*[inputs[k] for k in prog.inputs])
    assert isinstance(out, irfuse.Outputs) and out.keys() == prog.outputs
    checks = check_outputs(out.as_dict(), run_references(ref, inputs, dtype), dtype)
    assert all(c.ok for c in checks), [c.describe() for c in checks]
    assert all(o.dtype == prog.dtype and o.shape == (prog.shapes[k] if k in prog.uniform else (301, *prog.shapes[k]))
               for k, o in out.items())


def test_arguments_by_name_and_outputs_by_position_name_and_attribute(stvenant):
    ref = stvenant.compiled.reference_program
    inputs = random_inputs(ref, 50, 1, np.float32)
    by_position = stvenant(*[inputs[k] for k in stvenant.inputs])
    by_name = stvenant(**inputs)
    mixed = stvenant(inputs["ten4help1"], inputs["mat33helpf"], vecquadweightssums=inputs["vecquadweightssums"],
                     vec3dphi=inputs["vec3dphi"], mat33help1=inputs["mat33help1"])
    for out in (by_name, mixed):
        for k in stvenant.outputs:
            np.testing.assert_array_equal(out[k], by_position[k])
    assert by_name.vec3nodestiff is by_name["vec3nodestiff"] is by_name[1]
    ten3, vec3 = by_name
    assert ten3.shape == (50, 3, 3, 3) and vec3.shape == (50, 3)
    # `in` asks for a name, as of a mapping (the tuple's own test compared the string with each
    # array: a NumPy ValueError); an attribute cannot be set over an output's name
    assert "vec3nodestiff" in by_name and "nodestiff" not in by_name and vec3 in by_name and ten3.copy() not in by_name
    with pytest.raises(AttributeError, match="a call's Outputs are read-only: 'vec3nodestiff' cannot be set"):
        by_name.vec3nodestiff = vec3
    with pytest.raises(KeyError, match="no output 'x'"):
        by_name["x"]
    with pytest.raises(AttributeError):
        by_name.x


def test_new_data_each_call_and_nothing_grows_at_one_batch_size():
    synctest = irfuse.compile(open(example("synctest.kas")).read(), backend="cpu", filename="growth.kas")
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = rng.random((200, 3, 3), dtype=np.float32)
        (F,) = synctest(a)
        np.testing.assert_allclose(F, 5 * a, rtol=1e-6)
    # Contiguous arrays: the CPU backend's kernels read and write them in place, through one
    # recorded run whose slots hold no array between calls.
    assert list(synctest._bound) == [("host", 200)]
    slots = dict(synctest._bound[("host", 200)].inputs)
    synctest(a)
    assert all(synctest._bound[("host", 200)].inputs[k] is s for k, s in slots.items())  # re-used
    assert all(s.array is None for s in slots.values())
    # An output written over its input: the copying run, also kept once.
    for _ in range(3):
        a = rng.random((200, 3, 3), dtype=np.float32)
        want = synctest(a.copy()).F
        synctest(a, out=a)
        np.testing.assert_array_equal(a, want)
    assert list(synctest._bound) == [("host", 200), 200]
    buffers = dict(synctest._bound[200].inputs)
    synctest(a, out=a)
    assert all(synctest._bound[200].inputs[k] is b for k, b in buffers.items())  # re-used, not re-made
    # Strided views: kernels compiled for their strides, read in place, one variant per strides.
    for _ in range(3):
        strided = rng.random((400, 3, 3), dtype=np.float32)[::2]
        np.testing.assert_allclose(synctest(strided).F, 5 * strided, rtol=1e-6)
    assert list(synctest._variants) == [("aos", (("A", (18, 3, 1)),))]
    for n in (1, 2, 3, 4, 5, 6):
        synctest(rng.random((n, 3, 3), dtype=np.float32))
    assert len(synctest._bound) == irfuse.api.programs.BOUND_SIZES


def _views(rng, shape: tuple[int, ...], layout: str, kind: str) -> np.ndarray:
    """A random batch of `shape` in `layout` that is a strided view of a larger array."""
    if kind == "every other element":
        big = rng.random((*shape[:-1], 2 * shape[-1]) if layout == "soa" else (2 * shape[0], *shape[1:]),
                         dtype=np.float32)
        return big[..., ::2] if layout == "soa" else big[::2]
    if kind == "padded values":  # each value a corner of a larger one
        big = rng.random(tuple(d + (1 if k != (len(shape) - 1 if layout == "soa" else 0) else 0)
                               for k, d in enumerate(shape))).astype(np.float32)
        return big[tuple(slice(0, d) for d in shape)]
    assert kind == "transposed values"
    base = rng.random(shape).astype(np.float32)
    axes = list(range(len(shape)))
    value_axes = axes[:-1] if layout == "soa" else axes[1:]
    if len(value_axes) < 2:
        return base[::-1] if layout == "aos" else base[..., ::-1]  # a vector: elements in reverse
    a, b = value_axes[0], value_axes[1]
    if shape[a] != shape[b]:
        return base[::-1] if layout == "aos" else base[..., ::-1]
    axes[a], axes[b] = axes[b], axes[a]
    return np.ascontiguousarray(base.transpose(axes)).transpose(axes)  # same values, other strides


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("kind", ["every other element", "padded values", "transposed values"])
@pytest.mark.parametrize("name", ["stvenant.kas", "power_iteration.kas", "transform44.kas"])
def test_strided_views_are_read_and_written_in_place_by_kernels_compiled_for_them(name, kind, layout):
    """Inputs and out= arrays that are views of larger arrays: the kernels read and write
    them where they are (their strides compiled in), with the results of contiguous copies,
    bit for bit, and nothing outside the views touched."""
    prog = irfuse.compile(example(name), backend="cpu", layout=layout)
    rng = np.random.default_rng(zlib.crc32(f"{name} {kind} {layout}".encode()))
    n = 77
    shape = {k: (n, *prog.shapes[k]) if layout == "aos" else (*prog.shapes[k], n) for k in prog.shapes}
    views = {k: _views(rng, shape[k], layout, kind) for k in prog.inputs}
    assert not all(v.flags.c_contiguous for v in views.values())
    want = prog(**{k: np.ascontiguousarray(v) for k, v in views.items()})
    got = prog(**views)
    variant = prog._for(layout, prog._view_strides(views, None, layout))
    assert variant is not prog and variant.strides and variant.source != prog.source  # strided kernels ran
    for k in prog.outputs:
        np.testing.assert_array_equal(got[k], want[k])
    assert prog.check(**views).ok
    # out= views: written in place; the rest of the larger arrays keeps its sentinel.
    bigs = {k: np.full((2 * n, *prog.shapes[k]) if layout == "aos" else (*prog.shapes[k], 2 * n), -7.0, np.float32)
            for k in prog.outputs}
    outs = {k: (b[1::2] if layout == "aos" else b[..., 1::2]) for k, b in bigs.items()}
    prog(**views, out=outs)
    for k, b in bigs.items():
        np.testing.assert_array_equal(outs[k], want[k])
        assert np.all((b[0::2] if layout == "aos" else b[..., 0::2]) == -7.0)


def test_a_view_whose_elements_overlap_is_refused_as_an_output(synctest):
    a = np.random.default_rng(3).random((10, 3, 3), dtype=np.float32)
    overlapping = np.lib.stride_tricks.as_strided(np.zeros(40, np.float32), (10, 3, 3), (4, 12, 4))
    with pytest.raises(irfuse.UsageError, match="out= array for 'F' is a view whose elements overlap"):
        synctest(a, out=overlapping)
    broadcast = np.broadcast_to(a[:1], (10, 3, 3))  # one element read ten times: fine as an input
    np.testing.assert_array_equal(synctest(broadcast).F, synctest(np.ascontiguousarray(broadcast)).F)


def test_strided_views_give_the_results_of_contiguous_arrays(synctest, stvenant):
    rng = np.random.default_rng(1)
    big = rng.random((400, 3, 3), dtype=np.float32)
    every_other = big[::2]
    np.testing.assert_array_equal(synctest(every_other).F, synctest(np.ascontiguousarray(every_other)).F)
    soa = rng.random((3, 3, 300), dtype=np.float32)  # components contiguous, the batch axis last
    view = soa.transpose(2, 0, 1)  # the (N, 3, 3) view of it
    np.testing.assert_array_equal(synctest(view).F, 5 * view)
    ref = stvenant.compiled.reference_program
    inputs = random_inputs(ref, 64, 2, np.float32)
    fortran = {k: np.asfortranarray(v) for k, v in inputs.items()}
    for k in stvenant.outputs:
        np.testing.assert_array_equal(stvenant(**fortran)[k], stvenant(**inputs)[k])


def test_out_arrays_by_name_by_order_and_alone(synctest, stvenant):
    rng = np.random.default_rng(2)
    a = rng.random((100, 3, 3), dtype=np.float32)
    target = np.full((100, 3, 3), np.nan, dtype=np.float32)
    out = synctest(a, out=target)
    assert out.F is target and np.allclose(target, 5 * a)
    strided = np.full((200, 3, 3), np.nan, dtype=np.float32)[::2]
    synctest(a, out={"F": strided})
    np.testing.assert_array_equal(strided, target)
    ref = stvenant.compiled.reference_program
    inputs = random_inputs(ref, 40, 3, np.float32)
    want = stvenant(**inputs)
    t3 = np.empty((40, 3, 3, 3), np.float32)
    v3 = np.empty((40, 3), np.float32)
    got = stvenant(**inputs, out=(t3, v3))
    assert got[0] is t3 and got[1] is v3
    np.testing.assert_array_equal(t3, want[0])
    only = np.empty((40, 3), np.float32)
    got = stvenant(**inputs, out={"vec3nodestiff": only})
    assert got.vec3nodestiff is only and got.ten3help2 is not t3


def test_an_output_may_be_written_over_its_input(synctest):
    a = np.random.default_rng(3).random((70, 3, 3), dtype=np.float32)
    original = a.copy()
    synctest(a, out=a)
    np.testing.assert_allclose(a, 5 * original, rtol=1e-6)


def test_out_arrays_that_share_memory_are_refused(stvenant):
    """Two outputs cannot be held in one place: the copies out once left whichever came last
    (the GPU's calls refused it already)."""
    inputs = random_inputs(stvenant.compiled.reference_program, 30, 5, np.float32)
    t3 = np.empty((30, 3, 3, 3), np.float32)
    with pytest.raises(irfuse.UsageError, match="out= array for 'vec3nodestiff' overlaps the out= array for "
                                                "'ten3help2': each output needs memory of its own"):
        stvenant(**inputs, out=(t3, t3[:, 0, 0]))
    want = stvenant(**inputs)
    apart = stvenant(**inputs, out=(t3, np.empty((30, 3), np.float32)))  # (the same arrays apart: taken)
    np.testing.assert_array_equal(apart.ten3help2, want.ten3help2)


def test_an_empty_batch_gives_empty_outputs(stvenant):
    ref = stvenant.compiled.reference_program
    out = stvenant(**random_inputs(ref, 0, 0, np.float32))
    assert out.ten3help2.shape == (0, 3, 3, 3) and out.vec3nodestiff.shape == (0, 3)


class FakeDeviceArray:
    __cuda_array_interface__ = {"shape": (4, 3, 3), "typestr": "<f4", "data": (0, False), "version": 3}


@pytest.mark.parametrize("call, message", [
    (lambda p, a: p(), "missing input 'A'"),
    (lambda p, a: p(a, a), "takes 1 inputs \\(A\\), 2 were given by position"),
    (lambda p, a: p(a, B=a), "unknown input 'B': the program's inputs are A"),
    (lambda p, a: p(a, A=a), "input 'A' is given twice"),
    (lambda p, a: p(a[:, :2]), r"input 'A' has shape \(10, 2, 3\); expected \(N, 3, 3\)"),
    (lambda p, a: p(a.reshape(10, 9)), r"input 'A' has shape \(10, 9\); expected \(N, 3, 3\)"),
    (lambda p, a: p(a.astype(np.float64)), "input 'A' holds float64; the program was compiled for float32 "
                                           "and irfuse does not cast: convert it with .astype\\(numpy.float32\\), "
                                           "or compile the program with dtype='f64'"),
    (lambda p, a: p(a.astype(np.int32)), "input 'A' holds int32"),
    (lambda p, a: p(a > 0), "input 'A' holds bool; the program was compiled for float32 and irfuse does not cast: "
                            "convert it with .astype\\(numpy.float32\\)$"),  # (as a mask is given)
    (lambda p, a: p(a.astype(">f4")), r"input 'A' holds float32 in big-endian byte order \('>f4'\); the kernels "
                                      r"read this machine's byte order and irfuse does not cast: convert it with "
                                      r"\.astype\(numpy\.float32\)$"),
    (lambda p, a: p("A"), "input 'A' is a str, not an array"),
    (lambda p, a: p(__import__("array").array("f", a.ravel())), r"input 'A' is of type array\.array, not an array"),
    (lambda p, a: p(FakeDeviceArray()), "input 'A' is a GPU array"),
    (lambda p, a: p(a, out=np.empty((9, 3, 3), np.float32)), r"out= array for 'F' holds 9 elements, the other "
                                                              "arguments 10"),
    (lambda p, a: p(a, out=np.empty((10, 3, 3), np.float64)), "out= array for 'F' holds float64"),
    (lambda p, a: p(a, out={"G": a}), "out= names 'G', not outputs of the program"),
    (lambda p, a: p(a, out=(a, a)), "out= holds 2 arrays; the program has 1 outputs"),
    (lambda p, a: p(a, out=[1]), "out= array for 'F' is a int; with inputs in host memory out= takes NumPy arrays"),
])
def test_bad_arguments_are_refused_by_name(synctest, call, message):
    a = np.zeros((10, 3, 3), np.float32)
    with pytest.raises(irfuse.UsageError, match=message):
        call(synctest, a)


def test_batch_lengths_that_disagree_are_refused(stvenant):
    ref = stvenant.compiled.reference_program
    inputs = random_inputs(ref, 20, 0, np.float32)
    inputs["vec3dphi"] = inputs["vec3dphi"][:19]
    with pytest.raises(irfuse.UsageError, match=r"input 'vec3dphi' holds 19 elements, the other arguments "
                                                r"\(ten4help1, mat33helpf, mat33help1, vecquadweightssums\) 20"):
        stvenant(**inputs)


def test_a_read_only_out_array_is_refused(synctest):
    a = np.zeros((10, 3, 3), np.float32)
    frozen = np.zeros((10, 3, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(irfuse.UsageError, match="out= array for 'F' is read-only"):
        synctest(a, out=frozen)
    # made read-only after calls that wrote it: the call made again (its checks skipped) was written
    target = np.zeros((10, 3, 3), np.float32)
    b = a + 2
    synctest(b, out=target)
    synctest(b, out=target)
    target.flags.writeable = False
    b += 1
    with pytest.raises(irfuse.UsageError, match="out= array for 'F' is read-only"):
        synctest(b, out=target)
    assert np.all(target == 10)  # (5 times the 2 written before, not the new 3)


def test_check_and_verify_against_the_reference(synctest, emulated_gpu):
    a = np.random.default_rng(4).random((500, 3, 3), dtype=np.float32)
    report = synctest.check(a)
    assert report.ok and report.elements == 500 and "every element" in str(report)
    sampled = synctest.check(a, sample=100)
    assert sampled.ok and sampled.elements == 100 and "sample of 100 of 500" in str(sampled)
    broken = irfuse.compile(example("synctest.kas"), backend="cpu", pipeline="kas-dce,fuse-each")
    compiled = broken.compiled
    # A kernel whose stores are gone leaves its outputs unwritten: verify=True must say so
    # (of its CPU twin, whose stores are the copies edited out here).
    host = compiled.source.split("#else", 1)
    lines = [ln for ln in host[1].splitlines() if "irf_copy" not in ln or "g_" not in ln.split(",")[0]]
    compiled.source = host[0] + "#else" + "\n".join(lines) + "\n"
    bad = irfuse.Program(compiled, "cpu", [])
    with pytest.raises(irfuse.ExecutionError, match="disagree with the NumPy reference"):
        bad(a, verify=True)
    assert not bad.check(a).ok


def test_compile_returns_the_same_program_for_the_same_source_and_options():
    a = irfuse.compile(example("synctest.kas"), backend="cpu")
    assert irfuse.compile(example("synctest.kas"), backend="cpu") is a
    assert irfuse.compile(example("synctest.kas"), backend="cpu", dtype="f64") is not a
    text = open(example("synctest.kas")).read()
    b = irfuse.compile(text, backend="cpu", filename="synctest.kas")
    assert b is irfuse.compile(text, backend="cpu", filename="synctest.kas") and b is not a
    assert b.compiled.source == a.compiled.source  # the same program, compiled from its text


def test_a_profile_written_again_in_the_process_compiles_anew(tmp_path):
    """A program is kept by the bytes of the files its options read too: a device profile
    calibrated again (or a register table written again) plans anew; the kept program was
    returned before."""
    import json

    from irfuse.planner.profiles import CPU

    path = tmp_path / "profile.json"
    path.write_text(json.dumps(CPU.to_json()))
    a = irfuse.compile(example("strain_energy.kas"), backend="cpu", profile=str(path))
    assert irfuse.compile(example("strain_energy.kas"), backend="cpu", profile=str(path)) is a
    path.write_text(json.dumps({**CPU.to_json(), "sms": 64}))
    b = irfuse.compile(example("strain_energy.kas"), backend="cpu", profile=str(path))
    assert b is not a and b.check(np.ones((10, 6), np.float32), np.ones(10, np.float32),
                                  np.eye(6, dtype=np.float32)).ok


def test_source_text_errors_name_the_given_file_and_line():
    with pytest.raises(irfuse.CompileError, match=r"model\.kas:3:5: error: unknown op 'mmul34'"):
        irfuse.compile("matrix3x3 A, B;\ninput A;\nB = mmul34(A, A);\nreturn B;\n", backend="cpu",
                       filename="model.kas")
    with pytest.raises(irfuse.CompileError, match="no_such.kas: error: cannot read file"):
        irfuse.compile("no_such.kas", backend="cpu")
    # one line without ';' is taken for a path: code that is neither says both readings
    with pytest.raises(irfuse.UsageError, match="there is no file 'def f.x.: return x', and KAS source text holds "
                                                "statements ending in ';'"):
        irfuse.compile("def f(x): return x", backend="cpu")
    for empty in ("", "  ", "\n\t"):  # (read as the path '' before: "cannot read file")
        with pytest.raises(irfuse.UsageError, match="irfuse.compile: the source is empty"):
            irfuse.compile(empty, backend="cpu")


def test_a_byte_order_mark_at_the_start_of_a_source_is_skipped(tmp_path):
    """Editors on Windows start a UTF-8 file with a byte order mark: it was refused as an
    unexpected character at 1:1; the program is the same as without it, the first line's
    columns counted after it."""
    text = "scalar x, y;\ninput x;\ny = add(x, x);\nreturn y;\n"
    path = tmp_path / "marked.kas"
    path.write_text(text, encoding="utf-8-sig")
    x = np.arange(3, dtype=np.float32)
    assert irfuse.compile(str(path), backend="cpu")(x).y.tolist() == [0.0, 2.0, 4.0]
    assert irfuse.compile("\ufeff" + text, backend="cpu")(x).y.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(irfuse.CompileError, match="<source>:1:10: error: expected ';' after the declaration, found 'y'"):
        irfuse.compile("\ufeffscalar x y;\ninput x;\nreturn x;\n", backend="cpu")


def test_a_kas_module_compiles_and_pickles_as_its_text():
    from irfuse.dialects.context import module_text
    from irfuse.frontend.irgen import compile_file
    module = compile_file(example("synctest.kas")).module
    prog = irfuse.compile(module, backend="cpu")
    assert prog.name == "synctest" and prog is irfuse.compile(compile_file(example("synctest.kas")).module,
                                                               backend="cpu")
    a = np.random.default_rng(0).random((5, 3, 3), np.float32)
    np.testing.assert_array_equal(prog(a).F, irfuse.compile(example("synctest.kas"), backend="cpu")(a).F)
    assert pickle.loads(pickle.dumps(prog)) is prog
    assert module_text(module) == module_text(compile_file(example("synctest.kas")).module)  # not consumed
    broken = compile_file(example("synctest.kas")).module
    ret = next(op for op in broken.walk() if op.name == "kas.return")
    ret.detach()
    ret.erase(safe_erase=False)
    with pytest.raises(irfuse.UsageError, match="the module given is not a valid kas program: .*is not a terminator"):
        irfuse.compile(broken, backend="cpu")
    with pytest.raises(irfuse.UsageError, match="not a valid kas program: expected exactly one kas.program, found 0"):
        irfuse.compile(ModuleOp([]), backend="cpu")


def test_an_mlir_file_compiles_as_the_kas_program_it_holds(tmp_path):
    """A path to an `.mlir` file is the IR of a kas program (what irfuse-opt prints before any
    pass): compiled as its KAS source is, the same plan and bits, its text keying the cache."""
    from irfuse.dialects.context import module_text
    from irfuse.frontend.irgen import compile_file

    path = tmp_path / "neo.mlir"
    path.write_text(module_text(compile_file(example("neo_hookean.kas")).module))
    prog, kas = irfuse.compile(str(path), backend="cpu"), irfuse.compile(example("neo_hookean.kas"), backend="cpu")
    assert prog.name == "neo_hookean" and prog.inputs == kas.inputs and prog is irfuse.compile(path, backend="cpu")
    assert prog.compiled.source == kas.compiled.source
    F = (np.eye(3) + 0.1 * np.random.default_rng(1).standard_normal((40, 3, 3))).astype(np.float32)
    for got, want in zip(prog(F, 0.8, 1.5), kas(F, 0.8, 1.5)):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("text, message", [
    ("builtin.module {\n  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {\n"
     "    %B = kas.call @mmul3(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>\n"
     "    kas.return %B : !kas.matrix<3x3>\n  }\n}\n",
     r"bad\.mlir:3:5: error: unknown op 'mmul3'; did you mean mmul33(.|\n)*%B = kas\.call @mmul3"),
    ("builtin.module {\n  kas.nothing\n}\n", r"bad\.mlir:\d+:\d+: error: Operation kas\.nothing is not registered"),
    ("builtin.module {\n}\n", r"bad\.mlir: error: the IR holds 0 kas\.program ops"),
    ("", r"bad\.mlir: error: the file is empty"),
    ("matrix3x3 A;\ninput A;\nreturn A;\n", r"bad\.mlir:1:\d+: error: "),  # (KAS text in an .mlir file)
])
def test_a_bad_mlir_file_is_refused_at_its_line(tmp_path, text, message):
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    with pytest.raises(irfuse.CompileError, match=message):
        irfuse.compile(str(path), backend="cpu")


def test_a_lowered_mlir_file_is_refused_at_its_first_kernel(tmp_path):
    from irfuse.dialects.context import module_text
    from irfuse.driver.compile import lower
    from irfuse.frontend.irgen import compile_file

    path = tmp_path / "lowered.mlir"
    path.write_text(module_text(lower(compile_file(example("synctest.kas")).module)))
    with pytest.raises(irfuse.CompileError, match=r"lowered\.mlir:\d+:3: error: the IR is lowered already "
                                                  r"\(it holds fuse\.kernel\)(.|\n)*fuse\.kernel @synctest"):
        irfuse.compile(str(path), backend="cpu")


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "tpu"}, "backend 'tpu' is not one of auto, cuda, cpu"),
    ({"dtype": "f16"}, "dtype 'f16' is not one of f32, f64"),
    ({"registers": 3}, "registers= takes 'ptxas' or a register table's path, not 3"),
    ({"registers": ["ptxas"]}, "registers= takes 'ptxas' or a register table's path"),
    ({"filename": 3}, "filename= takes the name diagnostics give source text .a string., not 3"),
    ({"filename": b"a.kas"}, "filename= takes the name diagnostics give source text"),
    ({"tuning": 3}, "tuning= takes the path of a tuning result of 'irfuse tune', not 3"),
    ({"layout": np.zeros(2)}, "layout= is a name, not"),
    ({"dtype": 64}, "dtype 64 is not one of f32, f64"),
    ({"dtype": "int32"}, "dtype 'int32' is not one of f32, f64"),
    ({"dtype": np.int64}, "is not one of f32, f64"),
    ({"dtype": True}, "dtype True is not one of f32, f64"),
    ({"dtype": np.zeros(2)}, "is not one of f32, f64"),
])
def test_bad_compile_options_are_refused(kwargs, message):
    with pytest.raises(irfuse.UsageError, match=message):
        irfuse.compile(example("synctest.kas"), **kwargs)


@pytest.mark.parametrize("dtype, expected", [
    ("f64", np.float64), ("float64", np.float64), (np.float64, np.float64), (np.dtype("float32"), np.float32),
    ("float32", np.float32), (np.float32, np.float32),
])
def test_an_element_type_is_taken_by_numpys_names_and_types(dtype, expected):
    prog = irfuse.compile(example("synctest.kas"), backend="cpu", dtype=dtype)
    assert prog.dtype == np.dtype(expected)
    # the same program as by irfuse's own name (one compile, one cache entry)
    assert prog is irfuse.compile(example("synctest.kas"), backend="cpu",
                                  dtype="f64" if expected is np.float64 else "f32")


def test_an_element_type_is_taken_by_torchs_types():
    torch = pytest.importorskip("torch")
    assert irfuse.compile(example("synctest.kas"), backend="cpu", dtype=torch.float64).dtype == np.float64
    with pytest.raises(irfuse.UsageError, match="dtype torch.float16 is not one of f32, f64"):
        irfuse.compile(example("synctest.kas"), backend="cpu", dtype=torch.float16)


def test_a_tensor_that_requires_grad_is_refused_by_name_and_its_detach_taken():
    """A program's call is not recorded by PyTorch's autograd: a CPU tensor that requires grad
    (an element program's input, a uniform scalar, a mesh program's nodal input, the tangents')
    is refused by name, as PyTorch's `.numpy()` refuses it (a RuntimeError's traceback before),
    pointing to `.detach()` and to `irfuse.torch.op`; its `.detach()` gives the plain tensor's
    results."""
    torch = pytest.importorskip("torch")
    from irfuse.mesh import Connectivity, box_tetrahedra

    prog = irfuse.compile("matrix3x3 A, C; uniform scalar s;\ninput A, s;\nC = smmul33(A, s);\nreturn C;\n",
                          backend="cpu", dtype="f64")
    A = torch.arange(18, dtype=torch.float64).reshape(2, 3, 3)
    s = torch.tensor(2.0, dtype=torch.float64)
    for args, name in (((A.clone().requires_grad_(), s), "A"), ((A, s.clone().requires_grad_()), "s")):
        with pytest.raises(irfuse.UsageError, match=f"input '{name}' is a PyTorch tensor that requires grad.*"
                                                    r"\.detach\(\).*irfuse\.torch\.op"):
            prog(*args)
    got = prog(A.clone().requires_grad_().detach(), s).C
    assert np.array_equal(np.asarray(got), 2.0 * A.numpy())
    X, conn = box_tetrahedra(1)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    mesh = irfuse.compile(os.path.join(os.path.dirname(example("synctest.kas")), "mesh", "p1_residual.kas"),
                          backend="cpu", dtype="f64")
    u = torch.zeros(X.shape, dtype=torch.float64, requires_grad=True)
    args = (torch.from_numpy(X), u, Connectivity(conn, len(X)), torch.from_numpy(dN), 1.5, 0.75)
    for call in (lambda: mesh(*args), lambda: irfuse.tangent_matrix(mesh, *args, wrt="u"),
                 lambda: irfuse.diagonal(mesh, *args, wrt="u"),
                 lambda: irfuse.linear_operator(mesh, *args, wrt="u").matvec(np.zeros(X.size))):
        with pytest.raises(irfuse.UsageError, match="input 'u' is a PyTorch tensor that requires grad"):
            call()


def test_compiler_warnings_become_python_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = irfuse.compile("matrix3x3 A, B, C;\ninput A, B;\nC = madd33(A, A);\nreturn C;\n",
                              backend="cpu", filename="unused.kas")
    found = [w for w in caught if issubclass(w.category, irfuse.IrfuseWarning)]
    assert found and "unused.kas:2" in str(found[0].message) and "'B'" in str(found[0].message)
    assert prog.warnings


def test_close_releases_and_a_later_call_opens_again(tmp_path):
    prog = irfuse.compile("matrix3x3 A, F;\ninput A;\nF = madd33(A, A);\nreturn F;\n", backend="cpu")
    a = np.ones((8, 3, 3), np.float32)
    with prog:
        assert (prog(a).F == 2).all()
    assert prog._device is None and not prog._bound
    assert (prog(a).F == 2).all()


def test_gpu_and_host_inputs_are_not_mixed_and_stream_needs_gpu_arrays(stvenant, synctest):
    ref = stvenant.compiled.reference_program
    inputs = random_inputs(ref, 4, 0, np.float32)

    class OnGpu:
        __cuda_array_interface__ = {"shape": (4, 3, 3), "typestr": "<f4", "data": (1 << 20, False), "version": 3}

    inputs["mat33helpf"] = OnGpu()
    with pytest.raises(irfuse.UsageError, match="input 'mat33helpf' is on the GPU and input 'ten4help1' in host memory"):
        stvenant(**inputs)
    with pytest.raises(irfuse.UsageError, match="stream= orders a call on GPU arrays"):
        synctest(np.zeros((4, 3, 3), np.float32), stream=0)


def test_device_array_layout_rules():
    from irfuse.api.device_arrays import DeviceArray, overlaps

    def arr(ptr, shape, strides=None):
        return DeviceArray(None, ptr, shape, np.dtype(np.float32), strides, "x", None)

    assert arr(0, (10, 3, 3)).contiguous and arr(0, (10, 3, 3), (36, 12, 4)).contiguous
    assert not arr(0, (10, 3, 3), (72, 12, 4)).contiguous  # every other element
    assert not arr(0, (10, 3, 3), (4, 120, 40)).contiguous  # the batch axis last
    assert arr(0, (1, 3, 3), (999, 12, 4)).contiguous  # a length-1 axis may have any stride
    a, b = arr(0, (10, 3, 3)), arr(360, (10, 3, 3))
    assert not overlaps(a, b) and overlaps(a, arr(356, (10, 3, 3)))


def test_a_dlpack_capsule_is_read_for_pointer_shape_strides_and_type():
    """The DLPack reader on NumPy's own capsules (host memory, so the same structures the GPU
    libraries hand out can be checked here): a view's offset, strides and type come through."""
    from irfuse.api.device_arrays import array_from_dlpack_capsule

    base = np.arange(2 * 20 * 3 * 3, dtype=np.float64).reshape(2, 20, 3, 3)
    view = base[1, 3::2]  # an offset and a stride on the batch axis
    got = array_from_dlpack_capsule(view, view.__dlpack__())
    assert got.ptr == view.ctypes.data and got.shape == view.shape == (9, 3, 3)
    assert got.strides == view.strides and got.dtype == np.float64 and not got.contiguous
    whole = np.zeros((4, 3), np.int32)
    got = array_from_dlpack_capsule(whole, whole.__dlpack__())
    assert got.dtype == np.int32 and got.contiguous and got.ptr == whole.ctypes.data
    with pytest.raises(irfuse.UsageError, match="gave no DLPack tensor capsule"):
        array_from_dlpack_capsule(whole, object())


def test_a_compiled_program_is_kept_on_disk_and_read_back_by_the_next_process(tmp_path):
    """The second process reads the first one's entry (same kernels, same warnings, no
    compile); an entry damaged on disk (a file gone, a byte changed) is compiled again and
    replaced."""
    import subprocess
    import sys

    source = tmp_path / "warn.kas"
    source.write_text("matrix3x3 A, B, F;\ninput A, B;\nF = mmul33(A, A);\nreturn F;\n")  # B is unused
    script = ("import hashlib, sys, warnings, irfuse\n"
              "with warnings.catch_warnings(record=True) as w:\n"
              "    warnings.simplefilter('always')\n"
              f"    p = irfuse.compile({str(source)!r}, backend='cpu')\n"
              "print(p.compiled.meta.get('loaded_from'))\n"
              "print(hashlib.sha256(p.source.encode()).hexdigest())\n"
              "print(' | '.join(str(x.message) for x in w))\n")
    env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        return p.stdout.splitlines()

    first, second = run(), run()
    assert first[0] == "None" and second[0].startswith(str(tmp_path / "cache" / "program"))
    assert first[1:] == second[1:] and "'B'" in first[2]  # the same code, the same warning
    os.remove(os.path.join(second[0], "kernels.cu"))
    third = run()
    assert third[0] == "None" and third[1:] == first[1:]  # compiled again
    assert run()[0] == second[0]  # and the entry replaced
    with open(os.path.join(second[0], "kernels.cu"), "r+b") as f:  # one byte changed, the size kept
        f.seek(len(f.read()) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    assert run()[0] == "None"  # compiled again (the file's checksum no longer the one written; the
    # source is not read to load a program, so only the checksum finds it)
    assert run()[0] == second[0]


def test_the_program_cache_key_holds_the_library_and_every_option():
    from irfuse.dialects.kas import MatrixType
    from irfuse.api.program_cache import program_key
    from irfuse.library.catalogue import Library

    lib = Library()
    base = dict(text="t", dtype="f32", layout="aos")
    key = program_key(lib, **base)
    assert key == program_key(lib, **base)
    assert key != program_key(lib, **{**base, "layout": "soa"})
    lib.define("mtwice33", [("A", MatrixType(3, 3))], MatrixType(3, 3), "C[i,j] = A[i,j] + A[i,j]")
    assert program_key(lib, **base) != key  # a user op changes what a program may compile to


def test_the_package_digest_is_kept_for_the_very_files_it_was_read_from(tmp_path, monkeypatch):
    """The digest of irfuse's sources in a program's key is the files' content (hashlib's SHA-256
    over path and bytes), read once and then found by a stamp of the files' status; a file
    rewritten with the same size and modification time has a new stamp (its change time) and
    its new content is read."""
    import hashlib

    from irfuse.api.program_cache import package_digest

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__pycache__").mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.h").write_text("#define B 2\n")
    (root / "notes.txt").write_text("not source")
    (root / "__pycache__" / "c.py").write_text("skipped")

    def content(files):
        h = hashlib.sha256()
        for rel, text in files:
            h.update(rel.encode() + b"\0" + text.encode() + b"\0")
        return h.hexdigest()

    first = package_digest(str(root))
    assert first == content([("a.py", "x = 1\n"), ("sub/b.h", "#define B 2\n")])
    kept = list((tmp_path / "cache" / "package").rglob("*"))
    assert any(p.is_file() and p.read_text() == first for p in kept)
    package_digest.cache_clear()
    assert package_digest(str(root)) == first  # found again, the same
    stat = os.stat(root / "a.py")
    (root / "a.py").write_text("x = 2\n")  # same size, modification time set back
    os.utime(root / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    package_digest.cache_clear()
    assert package_digest(str(root)) == content([("a.py", "x = 2\n"), ("sub/b.h", "#define B 2\n")])
    package_digest.cache_clear()


def test_an_installed_library_entry_point_changes_the_program_cache_key(tmp_path, monkeypatch):
    """The key reads the installed entry points without importlib.metadata where none declares
    the group (`entry_points.declared`), and through it where one may: a plugin installed
    later makes every key new."""
    from importlib.metadata import entry_points

    from irfuse.api.program_cache import library_key
    from irfuse.library.entry_points import declared as library_points_declared

    assert library_key()["entry_points"] == sorted(
        (ep.name, ep.value, ep.dist.version) for ep in entry_points(group="irfuse.library"))
    other = tmp_path / "other-1.0.dist-info"  # a distribution with other entry points only
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1.0\n")
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not library_points_declared()
    before = library_key()
    plugin = tmp_path / "irfuse_plugin-2.5.dist-info"
    plugin.mkdir()
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: irfuse-plugin\nVersion: 2.5\n")
    (plugin / "entry_points.txt").write_text("[irfuse.library]\nextra = irfuse_plugin:register\n")
    assert library_points_declared()
    assert ("extra", "irfuse_plugin:register", "2.5") in library_key()["entry_points"]
    assert library_key() != before
    plugin.joinpath("entry_points.txt").write_text("[console_scripts]\nplugin = irfuse_plugin:main\n")
    assert not library_points_declared()
    pytest.importorskip("importlib_metadata")  # (Dask's: its finder, installed on import, reads the same folders)
    assert not library_points_declared()
    zipped = tmp_path / "packed.zip"  # (distributions importlib may find where no folder is read)
    zipped.write_bytes(b"")
    monkeypatch.syspath_prepend(str(zipped))
    assert library_points_declared()


class _HostMemory:
    """Host memory standing in for a device allocation (anything with a `ptr`)."""

    def __init__(self, array):
        self.array, self.ptr = array, array.ctypes.data


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_an_exported_array_is_read_in_place_by_a_dlpack_consumer_and_freed_after_it(dtype):
    import gc
    import weakref

    from irfuse.api.dlpack import KDL_CPU
    from irfuse.api.dlpack_export import DLPackExport, exported_tensors

    before = exported_tensors()
    host = np.arange(24).astype(dtype)
    memory = _HostMemory(host)
    gone = weakref.ref(memory)
    export = DLPackExport(memory, (2, 3, 4), np.dtype(dtype), KDL_CPU, 0)
    del memory
    view = np.from_dlpack(export)  # NumPy as the consumer, as JAX is for GPU outputs
    assert view.shape == (2, 3, 4) and view.dtype == dtype and view.ctypes.data == host.ctypes.data
    assert view[1, 2, 3] == 23
    host[5] = -1
    assert view[0, 1, 1] == -1  # the same memory, not a copy
    del export
    gc.collect()
    assert gone() is not None and exported_tensors() == before + 1  # the consumer still holds it
    del view
    gc.collect()
    assert gone() is None and exported_tensors() == before


def test_a_dlpack_capsule_nobody_takes_lets_go_of_its_memory_and_copies_are_refused():
    import gc

    from irfuse.api.dlpack import KDL_CPU
    from irfuse.api.dlpack_export import DLPackExport, exported_tensors

    before = exported_tensors()
    export = DLPackExport(_HostMemory(np.zeros(3)), (3,), np.dtype(np.float64), KDL_CPU, 0)
    capsule = export.__dlpack__()
    assert exported_tensors() == before + 1
    del capsule
    gc.collect()
    assert exported_tensors() == before
    with pytest.raises(BufferError, match="without copies"):
        export.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not"):
        export.__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_outputs_in_the_other_layout_than_the_inputs(stvenant, layout):
    """out_layout= asks for the outputs in either layout: new arrays, or out= arrays shaped in
    it; the kernels write them in place at their strides, with the results of a call in that
    layout, bit for bit."""
    other = "soa" if layout == "aos" else "aos"
    ref = stvenant.compiled.reference_program
    aos = random_inputs(ref, 301, 4, np.float32)
    ins = aos if layout == "aos" else {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in aos.items()}
    want = stvenant(**aos)
    got = stvenant(**ins, out_layout=other, verify=True)
    for k in stvenant.outputs:
        expected = want[k] if other == "aos" else np.moveaxis(want[k], 0, -1)
        assert got[k].shape == expected.shape and got[k].flags.c_contiguous
        np.testing.assert_array_equal(got[k], expected)
    outs = {k: np.full(got[k].shape, np.nan, np.float32) for k in stvenant.outputs}
    back = stvenant(**ins, out_layout=other, out=outs)
    for k in stvenant.outputs:
        assert back[k] is outs[k]
        np.testing.assert_array_equal(outs[k], got[k])
    assert stvenant(**ins, out_layout=layout)[stvenant.outputs[1]].shape == \
        ((301, 3) if layout == "aos" else (3, 301))
    with pytest.raises(irfuse.UsageError, match="out_layout: layout must be one of aos, soa, got 'xyz'"):
        stvenant(**ins, out_layout="xyz")
    wrong = {k: np.zeros(want[k].shape if other == "soa" else np.moveaxis(want[k], 0, -1).shape, np.float32)
             for k in stvenant.outputs}
    with pytest.raises(irfuse.UsageError, match="out= array for 'ten3help2'"):
        stvenant(**ins, out_layout=other, out=wrong)


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_host_arrays_off_the_kernels_alignment_give_the_right_results(synctest, layout):
    """A NumPy array made from a buffer may start anywhere; the CPU backend's kernels read
    their 16-byte copies from aligned memory only (an unaligned one crashed the process):
    such an array is read word by word, as a view."""
    prog = synctest.for_layout(layout)
    shape = (50, 3, 3) if layout == "aos" else (3, 3, 50)
    buf = np.zeros(450 + 1, np.float32)
    a = buf[1:].reshape(shape)
    a[...] = np.random.default_rng(8).random(shape, dtype=np.float32)
    assert a.ctypes.data % 16
    out = np.zeros(451, np.float32)[1:].reshape(shape)
    prog(a, out=out)
    np.testing.assert_array_equal(out, prog(np.ascontiguousarray(a)).F)
    np.testing.assert_array_equal(prog(a).F, out)


def test_a_gpu_call_is_a_dependent_launch_only_while_the_previous_run_certainly_runs(monkeypatch):
    """`InPlaceRun` (a call on the caller's GPU arrays) submits the run as a programmatic
    dependent launch only on the stream its program's previous run went to, and only before
    that run, and those queued behind it, can have finished (each taking its least time);
    otherwise, or where there is no dependent launch, its CUDA graph."""
    from irfuse.runtime import dependent_launch as dl

    log = []

    class Submitted:  # stands in for a CUDA graph and a dependent launch
        alive = True

        def __init__(self, what):
            self.what = what

        def launch_on(self, handle):
            log.append((self.what, handle))

        def destroy(self):
            log.append((self.what, "destroyed"))

    now = [100.0]
    monkeypatch.setattr(dl.time, "perf_counter", lambda: now[0])
    clock = dl.StreamClock()
    ms = 1e-3  # each run takes at least 1 ms
    run = dl.InPlaceRun(Submitted("graph"), Submitted("dependent"), clock, ms)
    other = dl.InPlaceRun(Submitted("graph 2"), Submitted("dependent 2"), clock, ms)  # other arrays
    plain = dl.InPlaceRun(Submitted("graph 3"), None, clock, ms)  # no dependent launch
    # (ms later, run, stream, dependent?); times below in ms from the first call
    steps = [(0.0, run, 7, False),     # idle: the graph; stream 7 busy until 1 at least
             (0.5, run, 7, True),      # 0.5 < 1, certainly running: dependent; until 2
             (1.2, other, 7, True),    # the same program on other arrays, the same clock: 1.7 < 2; until 3
             (0.2, run, 8, False),     # another stream: the graph; stream 8 busy until 2.9
             (0.8, run, 8, True),      # 2.7 < 2.9; until 3.9
             (2.5, run, 8, False),     # 5.2 > 3.9, may have finished: the graph; until 6.2
             (0.1, plain, 8, False),   # busy, but no dependent launch: the graph; until 6.3
             (0.1, run, 8, True)]      # 5.4 < 6.3
    for advance, r, stream, dependent in steps:
        now[0] += advance * 1e-3
        assert r.launch_on(stream) is dependent
    assert log == [("graph", 7), ("dependent", 7), ("dependent 2", 7), ("graph", 8), ("dependent", 8),
                   ("graph", 8), ("graph 3", 8), ("dependent", 8)]
    run.destroy()
    assert log[-1] == ("graph", "destroyed") and run.dependent is None


def test_a_saved_plan_keeps_what_its_kernels_need_at_launch(tmp_path):
    """A plan written and read back (as the disk cache does) has the kernels' launch facts
    unchanged, among them that they wait for the previous grid (dependent launches: every
    kernel, the combine kernels too) and how many blocks a launch may have whose last block
    combines the partials (the reducing kernel's; none for the combine kernel)."""
    from irfuse.driver.artifact import CompiledProgram
    from irfuse.driver.compile import compile_program
    from irfuse.passes.registry import DEFAULT_PIPELINE

    path = next(p for p in EXAMPLES if p.endswith("strain_energy.kas"))  # a reduction: a combine kernel
    pipeline = DEFAULT_PIPELINE.replace("fuse-partition", "fuse-partition{finish=last-block}", 1)
    plan, _ = compile_program(path, pipeline, "f32")
    assert all(k.after_previous_grid for k in plan.kernels)
    assert [k.finish_parts for k in plan.kernels] == [8192, 0]
    plan.save(str(tmp_path / "plan"))
    loaded = CompiledProgram.load(str(tmp_path / "plan"))
    assert [k.to_json() for k in loaded.kernels] == [k.to_json() for k in plan.kernels]
    assert [(k.after_previous_grid, k.finish_parts) for k in loaded.kernels] == \
        [(k.after_previous_grid, k.finish_parts) for k in plan.kernels]


def test_a_gpu_out_of_memory_hands_back_the_callers_cached_blocks_then_says_what_was_asked(monkeypatch):
    """irfuse's own GPU memory (`runtime.cuda_device.device_memory`) where the GPU has no room:
    the blocks PyTorch's caching allocator holds unused are handed back and the allocation
    tried again (it succeeds where they made the room); where it still fails, an
    ExecutionError names the bytes asked and what is free, never the driver's bare error.
    A driver and a PyTorch of stand-ins: the counts of what was asked of them."""
    import sys
    import types

    from irfuse.runtime.cuda_device import device_memory

    class NoRoom(Exception):
        pass

    class Driver:
        MemoryError = NoRoom

        def __init__(self, fails: int):
            self.fails, self.asked = fails, []

        def mem_alloc(self, nbytes):
            self.asked.append(nbytes)
            if len(self.asked) <= self.fails:
                raise NoRoom("cuMemAlloc failed: out of memory")
            return 0x1000

        def mem_get_info(self):
            return (123_456, 80_000_000_000)

    emptied = []
    cuda = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=lambda: emptied.append(1))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)

    roomy = Driver(fails=0)
    assert device_memory(roomy, 64) == 0x1000 and roomy.asked == [64] and not emptied
    freed = Driver(fails=1)  # (room made by PyTorch's cached blocks)
    assert device_memory(freed, 7_200_000_000) == 0x1000 and freed.asked == [7_200_000_000] * 2
    assert emptied == [1]
    full = Driver(fails=2)
    with pytest.raises(irfuse.ExecutionError, match=r"no room for 7,200,000,000 bytes.*123,456 of "
                                                    r"80,000,000,000 bytes free after PyTorch handed back"):
        device_memory(full, 7_200_000_000)
    assert full.asked == [7_200_000_000] * 2 and emptied == [1, 1]
