"""Programs written as Python functions (`@irfuse.program`): the same IR as the KAS seeds,
diagnostics at the Python line, and runs through the API."""

import inspect
import os
import re
import warnings

import numpy as np
import pytest

import irfuse
from conftest import LONG, ROOT
from irfuse.dialects.context import module_text
from irfuse.frontend.irgen import compile_file
from irfuse.frontend.python import compile_function
from irfuse.testing.python_renderings import canonical_ir
from python_programs import highorder, mesh, refused, seeds

SEEDS = ["bigfusion", "bigfusion_bench", "synctest", "transform44", "stvenant", "stvenant_inner", "rotation_loop",
         "power_iteration", "precession", "strain_energy", "cfl_step", "p1_elastic", "neo_hookean", "j2_return", "hex8"]


@pytest.mark.parametrize("name", ["lumped_mass", "p1_residual", "explicit_step"])
def test_python_mesh_programs_give_the_ir_of_the_kas_examples(name):
    python = compile_function(getattr(mesh, name).fn).module
    kas = compile_file(os.path.join(ROOT, "examples", "mesh", f"{name}.kas")).module
    assert module_text(python) == module_text(kas)


@pytest.mark.parametrize("name", ["bp1", "bp3"])
def test_python_high_order_programs_give_the_ir_of_the_kas_examples(name):
    python = compile_function(getattr(highorder, name).fn).module
    kas = compile_file(os.path.join(ROOT, "examples", "highorder", f"{name}.kas")).module
    assert module_text(python) == module_text(kas)


def test_a_python_mesh_program_with_infix_forms_runs_and_matches_the_kas_example():
    from irfuse.mesh import box_tetrahedra

    X, conn = box_tetrahedra(3, numbering="random", seed=2)
    X = X.astype(np.float32)
    u = np.random.default_rng(0).standard_normal(X.shape).astype(np.float32)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    args = (X, u, conn, dN, np.float32(1.5), np.float32(0.75))
    prog = irfuse.compile(mesh.p1_residual_infix, backend="cpu")
    assert prog.nodal == {"X", "u", prog.outputs[0]} and tuple(prog.index_inputs) == ("conn",)
    got = prog(*args, verify=True)[0]
    want = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cpu")(*args).r
    assert got.shape == X.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_mesh_annotations_and_calls_outside_a_program_are_refused():
    with pytest.raises(irfuse.UsageError, match="irfuse.Nodal takes irfuse.Scalar or irfuse.Vector"):
        irfuse.Nodal[irfuse.Matrix[3, 3]]
    with pytest.raises(irfuse.UsageError, match="irfuse.Nodal takes"):
        irfuse.Nodal[irfuse.Uniform[irfuse.Scalar]]
    with pytest.raises(irfuse.UsageError, match="irfuse.Index takes the number of nodes per element"):
        irfuse.Index[0]
    with pytest.raises(irfuse.UsageError, match="irfuse.Uniform takes a value type"):
        irfuse.Uniform[irfuse.Vector]
    with pytest.raises(irfuse.UsageError, match=r"irfuse.Vector\[...\] takes 1 positive integers, not \(True,\)"):
        irfuse.Vector[True]  # (a bool is an int to Python, not a size)
    with pytest.raises(irfuse.UsageError, match="call it inside an @irfuse.program function"):
        irfuse.gather(np.zeros((3, 3)), np.zeros((1, 4), np.int32))
    assert repr(irfuse.Nodal[irfuse.Vector[3]]) == "irfuse.Nodal[irfuse.Vector[3]]" and repr(irfuse.Index[4]) == \
        "irfuse.Index[4]"


def test_every_example_has_its_python_twin():
    examples = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".kas"))
    assert examples == sorted(SEEDS)


@pytest.mark.parametrize("name", SEEDS)
def test_python_functions_give_the_ir_of_the_kas_seeds(name):
    python = compile_function(getattr(seeds, name).fn).module
    kas = compile_file(os.path.join(ROOT, "examples", f"{name}.kas")).module
    assert module_text(python) == module_text(kas)


@pytest.mark.parametrize("name", ["stvenant", "rotation_loop"])
def test_a_python_program_runs_through_the_api(name):
    prog = irfuse.compile(getattr(seeds, name), backend="cpu")
    ref = prog.compiled.reference_program
    rng = np.random.default_rng(0)
    inputs = {k: rng.uniform(-1, 1, (130, *prog.shapes[k])).astype(np.float32) for k in prog.inputs}
    assert prog.check(**inputs).ok
    assert irfuse.compile(getattr(seeds, name), backend="cpu") is prog
    assert ref.sym_name.data == name


def test_calling_the_decorated_function_compiles_and_runs_it():
    a = np.random.default_rng(1).random((50, 3, 3), dtype=np.float32)
    np.testing.assert_allclose(seeds.synctest(a).F, 5 * a, rtol=1e-6)
    assert seeds.synctest.__doc__.startswith("A chain") and "synctest" in repr(seeds.synctest)


def test_a_decorated_function_called_compiles_for_its_arrays_float_type_or_the_decorators_options():
    """Called directly, a function under `@irfuse.program` takes float64 arrays as float32 ones
    (compiled once for each, at its first call with them; it was compiled for float32 only and
    refused float64 NumPy arrays); `@irfuse.program(...)` fixes `compile`'s options instead,
    and `@irfuse.program()` is the plain decorator."""
    fn = _function_of("import irfuse\nfrom irfuse import Matrix, Scalar\n\n"
                      "def f(A: Matrix[3, 3], s: Scalar):\n    B = A @ A * s\n    return B\n")
    a = np.random.default_rng(2).random((6, 3, 3))
    s = np.linspace(0.5, 1.5, 6)
    plain = irfuse.program(fn)
    wide, narrow = plain(a, s).B, plain(a.astype(np.float32), s=s.astype(np.float32)).B
    assert wide.dtype == np.float64 and narrow.dtype == np.float32 and set(plain._programs) == {"f64", "f32"}
    np.testing.assert_allclose(wide, a @ a * s[:, None, None], rtol=1e-14)
    np.testing.assert_allclose(narrow, wide, rtol=1e-5)
    assert irfuse.program()(fn)(a, s).B.dtype == np.float64
    fixed = irfuse.program(dtype="float32", backend="cpu")(fn)
    assert fixed.options == {"dtype": "f32", "backend": "cpu"}
    with pytest.raises(irfuse.UsageError, match="input 'A' holds float64; the program was compiled for float32"):
        fixed(a, s)
    with pytest.raises(irfuse.UsageError, match="@irfuse.program takes compile's options .*, not 'dtyp'"):
        irfuse.program(dtyp="f64")


def _marked_line(fn, marker: str) -> tuple[int, str]:
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if f"# {marker}:" in line:
            return start + k, line.split(f"# {marker}:")[1].strip()
    raise AssertionError(f"no '# {marker}:' in {fn.__name__}")


REFUSED = [name for name, fn in inspect.getmembers(refused, inspect.isfunction)
           if fn.__module__ == refused.__name__ and "# refused:" in inspect.getsource(fn)]


@pytest.mark.parametrize("name", REFUSED)
def test_what_cannot_be_traced_is_refused_at_its_python_line(name):
    fn = getattr(refused, name)
    line, message = _marked_line(fn, "refused")
    with pytest.raises(irfuse.CompileError) as e:
        irfuse.compile(fn, backend="cpu")
    text = str(e.value)
    assert re.search(rf"{re.escape(refused.__file__)}:{line}:\d+: error: ", text), text
    # (in the error's own words: the line quoted below them holds the marker's comment too)
    assert message in text.split("\n")[0], text
    assert inspect.getsourcelines(fn)[0][line - inspect.getsourcelines(fn)[1]].strip() in text  # the line quoted


def test_kas_frontend_warnings_point_at_the_python_line():
    line, message = _marked_line(refused.unused_input, "warned")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        irfuse.compile(refused.unused_input, backend="cpu")
    found = [str(w.message) for w in caught if issubclass(w.category, irfuse.IrfuseWarning)]
    assert any(f"{refused.__file__}:{line}:" in w and message in w.split("\n")[0] for w in found), found


def test_ops_outside_a_program_and_unknown_ops():
    with pytest.raises(irfuse.UsageError, match="irfuse.ops.mmul33 is an op of a program, not a function"):
        irfuse.ops.mmul33(1, 2)
    with pytest.raises(AttributeError, match="irfuse.ops has no op 'mmul77'"):
        irfuse.ops.mmul77
    assert "mneg33" in dir(irfuse.ops) and "vneg3" in dir(irfuse.ops)


def test_type_annotations_are_checked():
    with pytest.raises(irfuse.UsageError, match=r"irfuse.Matrix\[...\] takes 2 positive integers"):
        irfuse.Matrix[3]
    with pytest.raises(irfuse.UsageError, match="irfuse.Tensor"):
        irfuse.Tensor[3, 3]
    assert irfuse.Matrix[2, 3].spelling() == "matrix2x3" and irfuse.Scalar.spelling() == "scalar"


def test_negation_and_scalar_products_on_either_side(tmp_path):
    source = tmp_path / "neg.py"
    source.write_text(
        "import irfuse\nfrom irfuse import Matrix, Scalar, Vector\n\n"
        "def neg(A: Matrix[3, 3], v: Vector[3], s: Scalar):\n"
        "    B = -A\n    w = s * (-v)\n    C = (A - B) * s\n    t = -(s / s)\n    return B, w, C, t\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("neg_module", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prog = irfuse.compile(module.neg, backend="cpu")
    rng = np.random.default_rng(2)
    A = rng.random((40, 3, 3), dtype=np.float32)
    v = rng.random((40, 3), dtype=np.float32)
    s = rng.random(40, dtype=np.float32) + 0.5
    out = prog(A, v, s)
    np.testing.assert_array_equal(out.B, -A)
    np.testing.assert_allclose(out.w, -s[:, None] * v, rtol=1e-6)
    np.testing.assert_allclose(out.C, 2 * A * s[:, None, None], rtol=1e-6)
    np.testing.assert_allclose(out.t, -np.ones(40), rtol=1e-6)
    assert "mneg33" in module_text(prog.compiled.reference_module) and "_t1" in module_text(prog.compiled.reference_module)


def test_a_function_whose_source_is_not_on_disk_is_read_from_linecache():
    """A notebook cell's code is in linecache only: it compiles, and errors quote its line."""
    import linecache

    src = ("import irfuse\nfrom irfuse import Matrix\n\ndef cell(A: Matrix[3, 3]):\n    B = A + A\n"
           "    if B:\n        pass\n    return B\n\ndef fine(A: Matrix[3, 3]):\n    return A @ A\n")
    name = "<notebook-cell-7>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    namespace = {}
    exec(compile(src, name, "exec"), namespace)
    with pytest.raises(irfuse.CompileError, match=r"<notebook-cell-7>:6:8: error: a condition is a comparison") as e:
        irfuse.compile(namespace["cell"], backend="cpu")
    assert "    if B:" in str(e.value)
    a = np.random.default_rng(5).random((20, 3, 3), dtype=np.float32)
    np.testing.assert_allclose(irfuse.compile(namespace["fine"], backend="cpu")(a)[0], a @ a, rtol=1e-5)


def _function_of(src: str, name: str = "f"):
    """Function `name` of Python source `src`, its lines in linecache (a notebook cell's way)."""
    import linecache

    file = f"<chain-{abs(hash(src))}>"
    linecache.cache[file] = (len(src), None, src.splitlines(True), file)
    namespace = {}
    exec(compile(src, file, "exec"), namespace)
    return namespace[name]


def test_long_chains_of_infix_forms_trace_as_the_recursive_walk_does(monkeypatch):
    """`a + b + c + ...` nests to the left: its links are traced innermost first without a
    Python frame a link (a sum of 500 terms ran out of the stack), into the same program."""
    from irfuse.frontend import python as tracer

    head = "import irfuse\nfrom irfuse import Matrix, Scalar, Vector\n\n"
    terms = " + ".join(["A @ v * s", "v", "-v", "(v + v) * 2.0"] * 15)
    src = head + f"def f(A: Matrix[3, 3], v: Vector[3], s: Scalar):\n    w = {terms}\n    return w - v * s, w\n"
    chained = module_text(compile_function(_function_of(src)).module)
    monkeypatch.setattr(tracer._Translator, "SHORT_CHAIN", 10**6)
    assert module_text(compile_function(_function_of(src)).module) == chained
    monkeypatch.undo()
    long = _function_of(head + "def f(s: Scalar):\n    y = " + " + ".join(["s"] * 600) + "\n    return y\n")
    assert module_text(compile_function(long).module).count("kas.call @sadd") == 599
    deep = _function_of(head + "def f(s: Scalar):\n    m = s > 0.0\n    k = " + " and ".join(["m"] * 1500)
                        + "\n    y = irfuse.where(k, s, s)\n    return y\n")
    with pytest.raises(irfuse.CompileError, match="<chain-[0-9]+>:4:1: error: the function's expressions nest too "
                                                  "deeply to trace"):
        compile_function(deep)


def test_a_functions_derivative_decorators_are_part_of_what_keys_its_program():
    """The same function with another `@irfuse.derivative` (or none) is another program: the
    key was the function's IR alone, so in a process the first one compiled came back for the
    others, and from the disk cache a decorator changed in place (jvp to vjp) gave the old one."""
    from irfuse.driver.sources import read_source

    body = "@irfuse.program\ndef f(x: Vector[3], s: Scalar):\n    y = x * s\n    return y\n"
    head = "import irfuse\nfrom irfuse import Scalar, Vector\n\n"
    made = {}
    for line in ('@irfuse.derivative("jvp", wrt=("x",))\n', '@irfuse.derivative("vjp", wrt=("x",))\n',
                 '@irfuse.derivative("jvp", wrt=("x",), prefix="t")\n', ""):
        fn = _function_of(head + line + body)
        made[line] = (read_source(fn).text, irfuse.compile(fn, backend="cpu", dtype="f64").outputs)
    assert len({text for text, _ in made.values()}) == 4
    assert [outputs for _, outputs in made.values()] == [("y", "dy"), ("y", "bar_x"), ("y", "ty"), ("y",)]
    assert "// derivative vjp wrt x prefix bar_;" in made['@irfuse.derivative("vjp", wrt=("x",))\n'][0]


def test_not_and_or_of_masks_are_the_ops_not_and_or_and_conditions_may_call_ops():
    """`not m`, `a and b or c` on masks are the ops `not`, `and`, `or` (left to right), so a
    branch may test them; the KAS twin writes the calls in its conditions (`if (not(m))`,
    `if (or(and(gt(f, 0.5), not(m)), gt(g, 0.9)))`): both against NumPy; `not` of a scalar is
    refused at its line."""
    from irfuse.ops import gt

    def logic(f: irfuse.Scalar, m: irfuse.Mask, g: irfuse.Scalar):
        y = f
        if not m:
            y = y + 1.0
        if gt(f, 0.5) and not m or g > 0.9:
            y = y + 10.0
        return y

    kas = ("scalar f, g, y; mask m;\ninput f, m, g;\ny = scale(f, 1);\nif (not(m)) { y = add(y, 1); }\n"
           "if (or(and(gt(f, 0.5), not(m)), gt(g, 0.9))) { y = add(y, 10); }\nreturn y;")
    rng = np.random.default_rng(0)
    f, g = rng.uniform(-1, 1, 50), rng.random(50)
    m = (rng.random(50) < 0.5).astype(np.float64)
    want = np.where(m == 0, f + 1, f)
    want = np.where(((f > 0.5) & (m == 0)) | (g > 0.9), want + 10, want)
    for source in (logic, kas):
        prog = irfuse.compile(source, backend="cpu", dtype="f64")
        np.testing.assert_array_equal(prog(f, m, g).y, want)

    def scalar_not(f: irfuse.Scalar):
        if not f:
            f = f + 1.0
        return f

    with pytest.raises(irfuse.CompileError, match=r"test_python_frontend.py:\d+:\d+: error: 'not' does not take scalar"):
        compile_function(scalar_not)


def test_a_returned_expression_is_named_by_its_place_not_as_a_temporary():
    """`return R, venorm3(v)` gives outputs 'R' and 'out1' (not the temporary '_t1' that
    reports and `Outputs` once showed); a name a variable holds is not taken."""
    from irfuse.ops import venorm3

    def two(R: irfuse.Matrix[3, 3], v: irfuse.Vector[3]):
        out1 = venorm3(v)
        return R @ R, venorm3(R @ v), out1

    prog = irfuse.compile(two, backend="cpu")
    assert prog.outputs == ("out0", "out1_1", "out1")


def test_a_returned_entry_is_that_entry_not_its_value():
    """`return r[1], A[2], r`: the outputs are the entry r[1], the row A[2] and r, each under a
    name of its own (a returned entry once gave its value's name: r[1] returned r, silently)."""
    def entries(A: irfuse.Matrix[3, 3]):
        r = A[0]
        return r[1], A[2], r

    prog = irfuse.compile(entries, backend="cpu")
    assert prog.outputs == ("out0", "out1", "r")
    A = np.arange(45, dtype=np.float32).reshape(5, 3, 3)
    got = prog(A)
    assert np.array_equal(got.out0, A[:, 0, 1]) and np.array_equal(got.out1, A[:, 2]) and np.array_equal(got.r, A[:, 0])


def test_an_entry_of_a_nodal_value_is_nodal_and_an_entry_is_reduced_as_itself():
    """`r[2]` of a scatter's sums and `X[1]` of a nodal input are nodal values (they were taken
    for values per element and refused), gathered again once named; `irfuse.sum(v[0])` and
    `irfuse.max(X[2])` reduce the entry (the KAS front end reduced the whole array, a type it
    then refused). Against NumPy."""
    from irfuse.mesh import box_tetrahedra

    def entries(X: irfuse.Nodal[irfuse.Vector[3]], conn: irfuse.Index[4], v: irfuse.Vector[3]):
        r = irfuse.scatter(irfuse.gather(X, conn), conn)
        q = X[1] * r[2]
        s = irfuse.scatter(irfuse.gather(q, conn), conn)
        return s, irfuse.sum(v[0]), irfuse.max(X[2])

    X, conn = box_tetrahedra(2, numbering="random", seed=1)[:2]
    rng = np.random.default_rng(5)
    X = rng.standard_normal(X.shape)
    v = rng.standard_normal((len(conn), 3))
    got = irfuse.compile(entries, backend="cpu", dtype="f64")(X, conn, v, verify=True)
    r = np.zeros_like(X)
    np.add.at(r, conn, X[conn])
    s = np.zeros(len(X))
    np.add.at(s, conn, (X[:, 1] * r[:, 2])[conn])
    np.testing.assert_allclose(got.s, s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose([got.out1, got.out2], [v[:, 0].sum(), X[:, 2].max()], rtol=1e-12)


def _renderings():
    from irfuse.testing.random_programs import random_element_program, random_mesh_program, random_program

    return {"plain": lambda seed: random_program(seed, 12), "element": lambda seed: random_element_program(seed, 14),
            "mesh": lambda seed: random_mesh_program(seed, 8)}


@pytest.mark.parametrize("order", ["r, u", "u, r"])
def test_a_returned_expression_keeps_the_output_it_reads(order, tmp_path):
    """The rendering that moves outputs' last statements into the return keeps an output's
    statement where another returned expression reads it (`return r[0], r`): moved too, the
    return read a variable no statement assigned (found on seed 15 of the element programs)."""
    from irfuse.testing.python_renderings import compare_rendering, python_source

    kas = ("matrix3x3 A, B; vector3 r; scalar u;\ninput A;\nB = madd33(A, A);\nr = B[1];\nu = r[0];\n"
           f"return {order};\n")
    assert "    r = B[1]" in python_source(kas, inline=True)
    assert compare_rendering(kas, 1, str(tmp_path), inline=True)[0] != "differ"


def test_an_identity_times_a_value_is_not_written_for_the_librarys_identity_of_it(tmp_path):
    """`smimul22(s)` writes 0.0 off its diagonal, where NumPy's `s * np.eye(2)` has `s * 0`: NaN
    for a NaN s, -0.0 for a negative one (the fuzzer's seed 860102, `s = sqrt(a)`, took the
    rendering for a difference of the front end): the renderings write it so for a positive
    number only, and the program with a NaN s is the same program either way."""
    from irfuse.testing.python_renderings import compare_rendering, python_source

    kas = "scalar a, s; matrix2x2 M; uniform matrix2x2 P;\ninput a;\ns = ssqrt(a);\nM = smimul22(s);\nP = smimul22(2.5);\nreturn M, P;\n"
    assert "np.eye(2)" not in python_source(kas, infix=True).split("M =")[1].split("\n")[0]
    for seed in range(6):
        assert compare_rendering(kas, seed, str(tmp_path), infix=True)[0] != "differ"


@pytest.mark.parametrize("kind", ["plain", "element", "mesh"])
def test_random_kas_programs_written_as_python_functions_are_the_same_programs(kind, tmp_path):
    """The differential test of the Python front end: random KAS programs (the fuzzers'
    generators: loops; branches, masks, arrays, entries and batch-wide values; gathers,
    scatters and nodal values) written again as Python functions (`irfuse.testing.
    python_renderings`), each as written, with the outputs' last statements moved into the
    return (`return ops.f(a), r[1]`), with infix forms (`A @ B`, `s * A`, `-x`, `v / s`, `x ** p`)
    and Python's spellings (`abs(x)`, `max(a, b)`, `a if m else b`, `+x`, `v[-1]`, the
    module's numbers by name, `a, b = x, y`, `m & n`, `m ^ n`, `~m`, `m != n`, `a < x <= b`, a
    last `if` returning in each side, `np.eye(3)`, `np.array([a, b])`, `np.square(x)`,
    `A.trace()`, `A[1, :]`, `A[:]`, `A[0:2]`, `max(a, b, b)`, `s - (-v)`, `np.sum(np.diag(A))`,
    `np.max(np.array([a, b]))`, `y = 0.0`, `np.zeros((3, 3))`, `np.zeros_like(x)`, `A[0, 0] = A[0, 0]`,
    `x[:] = ...`) and with
    `derivative` lines (decorators in Python), trace to the same IR up to the values' and
    outputs' names, or, where the front ends place an op apart (an array's stack, a returned
    expression), to a program whose float64 reference results are the KAS program's bit for
    bit, output by output, or for a reverse derivative to rounding (its terms added in its
    program's order, which a returned expression moves: `compare_rendering`)."""
    from irfuse.testing.python_renderings import compare_rendering, derivative_lines

    found = []
    seeds = range(40 if LONG else 12)
    for seed in seeds:
        kas = _renderings()[kind](seed)
        derived = kas + derivative_lines(kas, seed)
        for source, inline, infix in ((kas, False, False), (kas, True, False), (kas, seed % 2 == 0, True),
                                      (derived, False, False), (derived, True, seed % 3 == 0)):
            verdict, detail = compare_rendering(source, seed, str(tmp_path), inline=inline, infix=infix)
            assert verdict != "differ", (seed, detail)
            found.append((source is kas and not inline and not infix, verdict))
    # (a test of the tracer as much as of the reference: most programs as written trace to their IR)
    assert sum(written and verdict == "alike" for written, verdict in found) >= len(seeds) // 2


SCALE = 0.25
LAST = 2


def test_pythons_own_spellings_are_the_generic_ops_and_the_modules_numbers(monkeypatch):
    """`x ** p`, `/` of any value by a scalar or one of its shape, `abs`, `max(a, b)`, `min(a, b)`,
    `+x`, `a if m else b`, an entry counted from the end, and numbers bound in the function's
    module or closure (`SCALE`, `math.pi`, read when it is compiled) are NumPy's meanings, the
    same IR as the generic ops and literals they stand for."""
    import math

    k = 3.0

    def spelled(A: irfuse.Matrix[2, 2], v: irfuse.Vector[3], w: irfuse.Vector[3], s: irfuse.Scalar):
        B = +(A ** 2) / s
        u = v / w
        y = abs(s - 0.5) ** -1
        z = max(v[-1], s) * SCALE - min(v[-LAST], k * math.pi)
        t = z if s > 0.5 else -z
        return B, u, y, t

    def written(A: irfuse.Matrix[2, 2], v: irfuse.Vector[3], w: irfuse.Vector[3], s: irfuse.Scalar):
        B = irfuse.ops.ediv(irfuse.ops.pow(A, 2), s)
        u = irfuse.ops.ediv(v, w)
        y = irfuse.ops.pow(irfuse.ops.abs(s - 0.5), -1)
        z = irfuse.ops.max(v[2], s) * 0.25 - irfuse.ops.min(v[1], 3.0 * 3.141592653589793)
        m = s > 0.5
        t = irfuse.where(m, z, -z)
        return B, u, y, t

    prog = irfuse.compile(spelled, backend="cpu", dtype="f64")
    rng = np.random.default_rng(5)
    A, v, w, s = rng.random((6, 2, 2)), rng.random((6, 3)), rng.random((6, 3)) + 0.5, rng.random(6) + 0.1
    B, u, y, t = prog(A, v, w, s)
    np.testing.assert_allclose(B, A ** 2 / s[:, None, None], rtol=1e-14)
    np.testing.assert_allclose(u, v / w, rtol=1e-15)
    np.testing.assert_allclose(y, np.abs(s - 0.5) ** -1.0, rtol=1e-14)
    z = np.maximum(v[:, 2], s) * 0.25 - np.minimum(v[:, 1], 3.0 * math.pi)
    np.testing.assert_allclose(t, np.where(s > 0.5, z, -z), rtol=1e-14)
    ir = [compile_function(f).module for f in (spelled, written)]
    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@written", "@spelled") for m in ir]
    assert texts[0] == texts[1]
    # The module's numbers are read when the function is compiled: another value, another program.
    monkeypatch.setitem(spelled.__globals__, "SCALE", 0.5)
    z = np.maximum(v[:, 2], s) * 0.5 - np.minimum(v[:, 1], 3.0 * math.pi)
    np.testing.assert_allclose(irfuse.compile(spelled, backend="cpu", dtype="f64")(A, v, w, s).t, np.where(s > 0.5, z, -z),
                               rtol=1e-14)


def test_numpys_logic_of_masks_chained_comparisons_and_masks_compared_are_their_ops():
    """NumPy's `m & n`, `m | n`, `m ^ n`, `~m`, masks compared (`m != n` is `xor`, `m == n` its
    `not`) and Python's chains (`a < b <= c` is `a < b and b <= c`, b traced once), in values,
    conditional expressions and `if` tests: NumPy's results, and the IR of the ops they stand
    for."""

    def spelled(a: irfuse.Scalar, b: irfuse.Scalar, c: irfuse.Scalar):
        m = a < b <= c
        n = (a > 0) ^ (b > 0)
        k = ~(a > 0) | (b < 0) & (c < 0)
        e = (a > 0) == (c > 0)
        y = a if m != k else b
        if -0.5 < a < b < 0.5:
            z = a * 2
        else:
            z = c
        if n == e:
            w = c
        else:
            w = a
        return y, z, w

    def written(a: irfuse.Scalar, b: irfuse.Scalar, c: irfuse.Scalar):
        t1 = a < b
        t2 = b <= c
        m = t1 and t2
        n = irfuse.ops.xor(a > 0, b > 0)
        k = (not (a > 0)) or ((b < 0) and (c < 0))
        e = not irfuse.ops.xor(a > 0, c > 0)
        y = irfuse.where(irfuse.ops.xor(m, k), a, b)
        t3, t4, t5 = -0.5 < a, a < b, b < 0.5
        t6 = t3 and t4
        t = t6 and t5
        if t:
            z = a * 2
        else:
            z = c
        if not irfuse.ops.xor(n, e):
            w = c
        else:
            w = a
        return y, z, w

    prog = irfuse.compile(spelled, backend="cpu", dtype="f64")
    rng = np.random.default_rng(8)
    a, b, c = (rng.uniform(-1, 1, 400) for _ in range(3))
    a[:50] = b[:50]  # (ties: <= against <)
    got = prog(a, b, c)
    m, n = (a < b) & (b <= c), (a > 0) ^ (b > 0)
    k, e = ~(a > 0) | (b < 0) & (c < 0), (a > 0) == (c > 0)
    np.testing.assert_array_equal(got.y, np.where(m != k, a, b))
    np.testing.assert_array_equal(got.z, np.where((-0.5 < a) & (a < b) & (b < 0.5), a * 2, c))
    np.testing.assert_array_equal(got.w, np.where(n == e, c, a))
    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@written", "@spelled")
             for m in (compile_function(f).module for f in (spelled, written))]
    assert texts[0] == texts[1]


def test_floor_division_and_remainder_are_numpys_to_the_bit():
    """`a // b` and `a % b` (and `//=`, `%=`) of values by a scalar or one of their shape are
    the generic `floordiv` and `mod`: NumPy's floor division and remainder to the bit, signed
    zeros, infinities and NaN included (the remainder takes the divisor's sign: a periodic box's
    `x % L`), in both float types."""

    def spelled(x: irfuse.Vector[3], L: irfuse.Uniform[irfuse.Scalar], s: irfuse.Scalar):
        wrapped = x % L
        cells = x // L
        q = s // -0.75
        r = s
        r %= x[0]
        return wrapped, cells, q, r

    def written(x: irfuse.Vector[3], L: irfuse.Uniform[irfuse.Scalar], s: irfuse.Scalar):
        wrapped = irfuse.ops.mod(x, L)
        cells = irfuse.ops.floordiv(x, L)
        q = irfuse.ops.floordiv(s, -0.75)
        r = s
        r = irfuse.ops.mod(r, x[0])
        return wrapped, cells, q, r

    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 1e-30])
    for dtype, npdt in (("f64", np.float64), ("f32", np.float32)):
        prog = irfuse.compile(spelled, backend="cpu", dtype=dtype)
        rng = np.random.default_rng(10)
        x = np.concatenate([np.stack([special] * 3, axis=1), rng.normal(0, 20, (300, 3))]).astype(npdt)
        s = np.concatenate([special[::-1], rng.normal(0, 3, 300)]).astype(npdt)
        for L in (npdt(2.5), npdt(-1.5)):
            got = prog(x, L, s)
            with np.errstate(all="ignore"):
                for value, want in ((got.wrapped, x % L), (got.cells, x // L), (got.q, s // npdt(-0.75)),
                                    (got.r, s % x[:, 0])):
                    np.testing.assert_array_equal(value, want)
                    assert (np.signbit(value) == np.signbit(want))[~np.isnan(want)].all()
    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@written", "@spelled")
             for m in (compile_function(f).module for f in (spelled, written))]
    assert texts[0] == texts[1]


def test_an_op_takes_its_operands_by_name_too():
    """`irfuse.ops.det(A=J)`, `ops.mvmul33(v=x, M=A)`, `ops.clamp(s, lo=..., hi=...)`: operands
    by the names of the op's definition (a catalogue op) or signature (a generic op), in any
    order after those given by position; the program of the call by position."""

    def named(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar):
        d = irfuse.ops.det(A=A)
        w = irfuse.ops.mvmul33(v=v, M=A)
        c = irfuse.ops.clamp(s, hi=0.5, lo=-0.5)
        return d, w, c

    def positional(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar):
        d = irfuse.ops.det(A)
        w = irfuse.ops.mvmul33(A, v)
        c = irfuse.ops.clamp(s, -0.5, 0.5)
        return d, w, c

    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@positional", "@named")
             for m in (compile_function(f).module for f in (named, positional))]
    assert texts[0] == texts[1]
    rng = np.random.default_rng(11)
    A, v, s = rng.random((9, 3, 3)), rng.random((9, 3)), rng.uniform(-1, 1, 9)
    got = irfuse.compile(named, backend="cpu", dtype="f64")(A, v, s)
    np.testing.assert_allclose(got.d, np.linalg.det(A), rtol=1e-12)
    np.testing.assert_allclose(got.w, np.einsum("nij,nj->ni", A, v), rtol=1e-14)
    np.testing.assert_array_equal(got.c, np.clip(s, -0.5, 0.5))


def test_a_value_returned_twice_is_two_outputs_of_its_value():
    """`return a, a` (Python's two references to one array) gives two outputs of the value, the
    second a copy named by its place, as a returned expression is; an input returned twice too."""

    def twice(s: irfuse.Scalar, v: irfuse.Vector[3]):
        a = s * 2
        return a, a, v, v

    prog = irfuse.compile(twice, backend="cpu", dtype="f64")
    assert prog.outputs == ("a", "out1", "v", "out3")
    s, v = np.linspace(0, 1, 7), np.arange(21.0).reshape(7, 3)
    got = prog(s, v)
    np.testing.assert_array_equal(got.a, 2 * s)
    np.testing.assert_array_equal(got.out1, 2 * s)
    np.testing.assert_array_equal(got.out3, v)
    assert not np.shares_memory(got.a, got.out1)


def test_values_numpy_makes_and_numpys_array_methods_are_the_ops_of_their_meaning():
    """`np.eye(n)` and `np.identity(n)` are the uniform identity (the library's `smimulNN` of
    1), `np.array([...])` and `np.stack([...])` the op `stack` (a list inside a list stacked
    first: `np.array([[a, 0], [0, b]])` is a matrix of its rows; `np.array(x)` a copy of x),
    `np.square(x)` is `x * x`, `np.fabs` `abs`, and NumPy's array methods of a program's value
    (`A.trace()`, `A.sum()`, `A.dot(v)`, `A.transpose()`, `x.clip(lo, hi)`) NumPy's functions
    of that value first: what NumPy computes for each element, to rounding."""

    def made(F: irfuse.Matrix[3, 3], a: irfuse.Scalar, b: irfuse.Scalar):
        E = 0.5 * (F.T @ F - np.eye(3))
        C = np.array([[2.0, 0, 0], [0, a, 0], [0, 0, b]])
        v = np.stack([F[0], F[1] * a])
        w = np.array([a, b, 1.5])
        t = (C @ F).trace() + E.sum() + F.dot(w).dot(w) + np.square(a) + np.fabs(b)
        D = F.transpose().clip(-0.5, a) - np.trace(F) / 3 * np.identity(3)
        return E, C, v, w, t, D, np.array(w)

    prog = irfuse.compile(made, backend="cpu", dtype="f64")
    assert prog.shapes["C"] == (3, 3) and prog.shapes["v"] == (2, 3) and prog.shapes["w"] == (3,)
    rng = np.random.default_rng(5)
    F, a, b = rng.standard_normal((40, 3, 3)), rng.random(40), -rng.random(40)
    got = prog(F, a, b)
    for e in range(40):
        for name, want in zip(prog.outputs, made(F[e], a[e], b[e])):
            np.testing.assert_allclose(got[name][e], want, rtol=1e-14, atol=1e-15, err_msg=name)
    text = module_text(compile_function(made).module)
    assert "@smimul33(" in text and "@stack_3_s_s_s(" in text and "@stack_2_" in text
    # (the same IR as the ops written out)

    def spelled(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar):
        return A.trace(), A.dot(v), np.square(s), v.clip(0, s), np.array([[s, 1.0], [2.0, s]]) @ np.eye(2)

    def written(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar):
        return (irfuse.ops.trace(A), irfuse.ops.mvmul33(A, v), s * s, irfuse.ops.clamp(v, 0, s),
                irfuse.ops.stack(irfuse.ops.stack(s, 1.0), irfuse.ops.stack(2.0, s)) @ irfuse.ops.smimul22(1.0))

    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@spelled", "@written")
             for m in (compile_function(f).module for f in (spelled, written))]
    assert texts[0] == texts[1]


def test_a_slice_of_a_value_is_numpys_view_of_it_as_a_value():
    """`A[:, 1]`, `A[0, :]`, `v[0:2]`, `A[0:2, 1:]`, `v[::-1]`, `T[1][:, 2]`, `T[:, 0, ::2]`,
    `A[-1, :]`, `A[:]`, `T[:, 0][1]` (NumPy's `T[1, 0]`): the entries NumPy's slice takes, in its
    order and shape, to the bit; a
    slice keeping every axis whole, or an entry with the later axes whole (`A[1, :]`), is the
    same IR as the value or the entry."""

    def sliced(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], T: irfuse.Tensor[2, 3, 3]):
        c = A[:, 1]
        u = v[0:2]
        B = A[0:2, 1:]
        w = v[::-1]
        C = T[1][:, 2]
        D = T[:, 0, ::2]
        s = A[:2, :2].trace() - A[-1, :][2]
        chained = T[:, 0][1] + T[:, 1:][1][0, ::2][0]  # (a subscript after a slice indexes the slice's value)
        return c, u, B, w, C, D, s, chained, A[1:, 0] * 2.0, A[:, 1][0]

    prog = irfuse.compile(sliced, backend="cpu", dtype="f64")
    rng = np.random.default_rng(3)
    A, v, T = rng.standard_normal((9, 3, 3)), rng.standard_normal((9, 3)), rng.standard_normal((9, 2, 3, 3))
    got = prog(A, v, T)
    for e in range(9):
        for name, want in zip(prog.outputs, sliced(A[e], v[e], T[e])):
            assert got[name][e].shape == np.shape(want) and np.array_equal(got[name][e], want), name

    def views(A: irfuse.Matrix[3, 3]):
        r = A[1, :]
        B = A[:]
        return r, B

    def plain(A: irfuse.Matrix[3, 3]):
        r = A[1]
        B = A
        return r, B

    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@views", "@plain")
             for m in (compile_function(f).module for f in (views, plain))]
    assert texts[0] == texts[1]


def test_a_number_given_to_a_variable_is_in_every_element_where_it_holds_one_value_each():
    """`E = 0.0` before `E += w[q] * X[q, 0]` in a loop (an accumulator), `m = 1.0` before a
    product, `y: irfuse.Scalar = 0.0`, `v[1] = 0.0`, `a, b = b + a, 0.0`, `return 2.0` (an output of
    that number for the batch, as `B = 2.0; return B`): the number in every element where the
    variable holds one value per element (declared so, or so later: traced again), exactly
    (`-0.0` too), and one value for the batch where it stays a number's; what Python computes
    for each element, to the bit and the sign of zero."""

    def accumulated(X: irfuse.Matrix[4, 3], w: irfuse.Uniform[irfuse.Vector[4]]):
        E = 0.0
        m = 1.0
        for q in range(4):
            E += w[q] * X[q, 0]
            m = m * X[q][1]
        c = -0.0
        k = 2.0
        return E, m, c, k * 3.0

    def declared(v: irfuse.Vector[3], a: irfuse.Scalar):
        y: irfuse.Scalar = 0.0
        z = -0.0
        z = z + a * 0.0
        v[1] = 0.0
        return y, v, z

    def numbers(a: irfuse.Scalar, b: irfuse.Scalar):
        a, b = b + a, 0.0
        return a, b, 2.0

    rng = np.random.default_rng(12)
    for fn, per_element in ((accumulated, [True, True, False, False]), (declared, [True, True, True]),
                            (numbers, [True, True, False])):
        prog = irfuse.compile(fn, backend="cpu", dtype="f64")
        assert [o not in prog.uniform for o in prog.outputs] == per_element, fn.__name__
        arrays = {k: rng.standard_normal(prog.shapes[k] if k in prog.uniform else (16, *prog.shapes[k]))
                  for k in prog.inputs}
        got = prog(**arrays)
        for e in range(16):
            want = fn(*(arrays[k] if k in prog.uniform else arrays[k][e] for k in prog.inputs))
            for name, w in zip(prog.outputs, want):
                g = np.asarray(got[name] if name in prog.uniform else got[name][e])
                assert np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w)), (fn.__name__, name, e)


def test_numpys_zeros_filled_entry_by_entry_and_an_entry_of_an_entry_assigned():
    """`v = np.zeros(3)` then `v[0] = a`, `B = np.zeros((3, 4))` then `B[0, 1] = x`,
    `B[1][3] = y`, `D[i, 0] = ...` by a loop's counter, `T[1, 0, 1] = a`, `C[1, 2] = b` of a
    computed matrix, `np.zeros_like(A)`, `np.zeros(3)` as an operand: NumPy's values, to the
    bit; zeros given entries per element are zeros in every element (traced again), zeros given
    none stay one value for the batch. An entry of an entry is copied out, assigned and copied
    back (the KAS form); a loop's counter past the first index is refused, saying so."""

    def filled(a: irfuse.Scalar, b: irfuse.Scalar, dN: irfuse.Matrix[4, 3], A: irfuse.Matrix[3, 3]):
        v = np.zeros(3)
        v[0] = a
        v[2] = b
        B = np.zeros((3, 4))
        B[0, 1] = dN[1, 0]
        B[1][3] = dN[3, 1] * a
        D = np.zeros((4, 3))
        for i in range(4):
            D[i, 0] = dN[i, 1]
        B[2, 3] = b
        C = A * 1.0
        C[1, 2] = a
        u = np.zeros(2)
        T = np.zeros((2, 2, 2))
        T[1, 0, 1] = a
        return v, B, C, u, np.zeros_like(A) + A, T, v + np.zeros(3), D

    prog = irfuse.compile(filled, backend="cpu", dtype="f64")
    assert [o in prog.uniform for o in prog.outputs] == [False, False, False, True, False, False, False, False]
    rng = np.random.default_rng(13)
    arrays = {k: rng.standard_normal((10, *prog.shapes[k])) for k in prog.inputs}
    got = prog(**arrays)
    for e in range(10):
        for name, want in zip(prog.outputs, filled(*(arrays[k][e].copy() for k in prog.inputs))):
            g = np.asarray(got[name]) if name in prog.uniform else np.asarray(got[name])[e]
            assert g.shape == np.shape(want) and np.array_equal(g, want), (name, e)

    def by_a_counter_past_the_first(dN: irfuse.Matrix[4, 3]):
        B = np.zeros((3, 4))
        for i in range(4):
            B[0, i] = dN[i, 0]
        return B

    with pytest.raises(irfuse.CompileError, match=r"'B\[0, i\]': a loop's counter assigns an entry along the first"):
        irfuse.compile(by_a_counter_past_the_first, backend="cpu")


def test_a_slice_assigned_is_numpys_assignment_to_its_entries():
    """`B[:, 0] = v`, `C[1, :] = 0.0`, `D[0:2] = D[1:]` (the value computed before any entry is
    written, as NumPy's overlapping copy), `E[:, 1] = v * a` into zeros, `w[::2] = a` (a scalar
    in every entry), `F[1:, 1:] = A[:2, :2]`, `G[:, 0] = A[1]` (found in review: the entry was
    read as the value it is an entry of): NumPy's results, to the bit."""

    def assigned(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], a: irfuse.Scalar):
        B = A * 1.0
        B[:, 0] = v
        C = A * 2.0
        C[1, :] = 0.0
        D = A * 3.0
        D[0:2] = D[1:]
        E = np.zeros((3, 3))
        E[:, 1] = v * a
        w = v * 1.0
        w[::2] = a
        F = A * 1.0
        F[1:, 1:] = A[:2, :2]
        G = A * 1.0
        G[:, 0] = A[1]  # (an entry, not the value it is an entry of)
        return B, C, D, E, w, F, G

    prog = irfuse.compile(assigned, backend="cpu", dtype="f64")
    rng = np.random.default_rng(14)
    arrays = {k: rng.standard_normal((8, *prog.shapes[k])) for k in prog.inputs}
    got = prog(**arrays)
    for e in range(8):
        for name, want in zip(prog.outputs, assigned(*(arrays[k][e].copy() for k in prog.inputs))):
            assert np.array_equal(np.asarray(got[name])[e], want), (name, e)


def test_numpys_diagonal_and_largest_entry_are_those_of_its_meaning():
    """`np.diag(A)` is a matrix's diagonal (of a 2x3 matrix its two), `np.diag(v)` the matrix of
    that diagonal, zeros off it; `np.max(A)`, `np.amax`, `A.max()`, `np.min`, `A.min()` the
    largest or smallest of a value's entries (of a scalar itself): NumPy's, to the bit. NumPy's
    functions a program does not take and that have a spelling it takes are refused saying it."""

    def reduced(A: irfuse.Matrix[3, 3], B: irfuse.Matrix[2, 3], u: irfuse.Vector[3],
                T: irfuse.Tensor[2, 2, 2], a: irfuse.Scalar):
        return (np.diag(A), np.diag(B), np.diag(u), np.max(A), A.min(), np.amax(T), u.max(), np.min(a),
                np.sum(np.diag(A)))

    prog = irfuse.compile(reduced, backend="cpu", dtype="f64")
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((12, *shape)) for shape in ((3, 3), (2, 3), (3,), (2, 2, 2), ())]
    arrays[0][3, 1, 1] = np.nan  # (NumPy's max of entries one of which is NaN: NaN)
    got = prog(*arrays)
    for e in range(12):
        for name, want in zip(prog.outputs, reduced(*(x[e] for x in arrays))):
            assert np.shape(got[name][e]) == np.shape(want), name
            np.testing.assert_array_equal(got[name][e], want, err_msg=name)


def test_a_scalar_left_of_a_value_is_put_in_every_entry_and_max_min_take_more_values():
    """NumPy's broadcast of a scalar on the left of `-`, `/`, `**`, `//`, `%` (`1 - v`,
    `s / v`, `2.0 ** v`): the scalar in every entry, then the entries' op, to the bit (`**`:
    NumPy's power to an ulp); Python's `max(a, b, c)` and `min(...)` of more values are
    `max(max(a, b), c)`, left to right."""

    def broadcast(u: irfuse.Vector[3], A: irfuse.Matrix[2, 3], a: irfuse.Scalar, b: irfuse.Scalar):
        return (1.0 - u, a / (u + 2.0), a - A, 2.0 ** u, a // (A + 1.0), a % (u + 1.0), max(a, b, 0.5),
                min(a, a * b, a - b, 0.25))

    prog = irfuse.compile(broadcast, backend="cpu", dtype="f64")
    rng = np.random.default_rng(8)
    u, A, a, b = rng.standard_normal((30, 3)), rng.standard_normal((30, 2, 3)), rng.random(30), rng.random(30)
    got = prog(u, A, a, b)
    for e in range(30):
        for name, want in zip(prog.outputs, broadcast(u[e], A[e], a[e], b[e])):
            if name in ("out6", "out7"):  # (Python's max and min of numbers, none NaN)
                assert float(got[name][e]) == want
            else:
                np.testing.assert_allclose(got[name][e], want, rtol=1e-15 if name == "out3" else 0, atol=0)


def test_values_of_uniform_values_alone_made_in_a_loop_are_made_before_it():
    """In a loop's body, `np.eye(2)`, `np.array([...])` of numbers, a uniform scalar put in
    every entry (`s - v`) and a product of uniform values (`2.0 * s`) are the same on every trip,
    and a uniform value is not assigned inside a loop: their temporaries are made before the
    outermost loop (found by the fuzzer, seed 840022: `v * np.eye(2)` in a loop was refused);
    a reduction over the batch in a loop stays refused (its value changes with the trips)."""

    def looped(F: irfuse.Matrix[2, 2], v: irfuse.Vector[2], s: irfuse.Uniform[irfuse.Scalar]):
        for _ in range(3):
            for _ in range(2):
                F = F @ (0.5 * np.eye(2)) + np.array([[0.0, 1.0], [1.0, 0.0]])
                v = (s - v) * (2.0 * s)
        return F, v

    prog = irfuse.compile(looped, backend="cpu", dtype="f64")
    rng = np.random.default_rng(4)
    F, v, s = rng.standard_normal((20, 2, 2)), rng.standard_normal((20, 2)), np.float64(0.75)
    got = prog(F, v, s)
    for e in range(20):
        for name, want in zip(prog.outputs, looped(F[e], v[e], s)):
            np.testing.assert_array_equal(got[name][e], want)
    text = module_text(compile_function(looped).module)
    assert text.index("@smimul22") < text.index("kas.loop")  # (made once, before the loops)

    def summed_in_a_loop(x: irfuse.Scalar):
        for _ in range(2):
            x = x - irfuse.sum(x) * 0.5
        return x

    with pytest.raises(irfuse.CompileError, match="error: 'sum' cannot be inside a loop"):
        irfuse.compile(summed_in_a_loop, backend="cpu")


def test_a_return_inside_if_else_is_the_program_with_one_return_at_its_end():
    """A `return` inside an `if` (early, in each side, in an `elif`, in an `if` inside a side)
    is the program with one `return` at its end: per element, what Python gives calling the
    function on that element's numbers (both sides computed, each place selected); a place
    every `return` fills with one variable keeps its name, another is named by its place; code
    after a `return` is not read; an `if`/`else` each side of which returns the same names is
    the same IR as the `if`/`else` assigning them and one `return` after."""

    def early(a: irfuse.Scalar, b: irfuse.Scalar):
        y = a * b
        if a > 0.5:
            return y, a * 2
        z = y - b
        return y, z

    def each_side(a: irfuse.Scalar, b: irfuse.Scalar):
        if a > b:
            c = a - b
            return c
        elif a > 0.25:
            return a
        else:
            c = b * 3
        c = c + 1.0
        return c
        c = c * 10.0  # (never run)

    def inner(a: irfuse.Scalar, b: irfuse.Scalar):
        y = a + b
        if a > 0.5:
            y = y * 2
            if b > 0.5:
                return y
            y = y - a
        return y

    def sides_returning(a: irfuse.Scalar, b: irfuse.Scalar):
        y = a * 1.0
        if a > b:
            y = a * b
            return y, b
        else:
            return y, b

    def sides_assigning(a: irfuse.Scalar, b: irfuse.Scalar):
        y = a * 1.0
        if a > b:
            y = a * b
        return y, b

    rng = np.random.default_rng(11)
    a, b = rng.random(64), rng.random(64)
    for fn, names in ((early, ("y", "out1")), (each_side, ("out0",)), (inner, ("y",)),
                      (sides_returning, ("y", "b"))):
        prog = irfuse.compile(fn, backend="cpu", dtype="f64")
        assert prog.outputs == names, fn.__name__
        got = prog(a, b)
        for e in range(a.size):
            want = fn(float(a[e]), float(b[e]))
            want = want if isinstance(want, tuple) else (want,)
            assert tuple(float(got[n][e]) for n in names) == want, (fn.__name__, e)
    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@sides_returning", "@sides_assigning")
             for m in (compile_function(f).module for f in (sides_returning, sides_assigning))]
    assert texts[0] == texts[1]


def test_numpys_functions_of_values_are_the_ops_of_their_meaning():
    """NumPy's (and `math`'s) functions of a program's values, called as a NumPy user writes
    them, are the generic ops of their meaning (`np.sin` is `sin`, `np.maximum` `max`, `np.where`
    `select`, `np.clip` `clamp`, `np.einsum` `contract`, `np.linalg.det` `det`, `np.sum` of a
    value its entries' sum) or the infix
    forms (`np.add` is `+`, `np.matmul` and `np.dot` `@`); `*` of two values of one shape is
    NumPy's product entry by entry, and `+`, `-` of a value and a scalar put the scalar to every
    entry: the same IR as the ops written, NumPy's results."""
    import math

    def spelled(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar, t: irfuse.Scalar):
        a = np.sin(A) * np.exp(-np.abs(A))
        b = np.maximum(v, t) - np.clip(v, -0.5, 0.5) + v * v - 1.0
        c = np.where(s > t, np.floor(s), math.sqrt(2.0) * np.tanh(t)) + 2.0 + s
        d = np.einsum("ij,j->i", A, v) + np.dot(A, v) + np.matmul(A, v)
        e = np.linalg.det(A) + np.trace(A) + np.linalg.norm(v) + np.dot(v, v)
        f = np.linalg.inv(A) + np.transpose(A) + np.outer(v, v) - np.negative(A)
        g = np.sum(A) + np.sum(v * v)
        return a, b, c, d, e, f, g

    def written(A: irfuse.Matrix[3, 3], v: irfuse.Vector[3], s: irfuse.Scalar, t: irfuse.Scalar):
        a = irfuse.ops.emul(irfuse.ops.sin(A), irfuse.ops.exp(-irfuse.ops.abs(A)))
        b = irfuse.ops.sub(irfuse.ops.max(v, t) - irfuse.ops.clamp(v, -0.5, 0.5) + irfuse.ops.emul(v, v), 1.0)
        c = irfuse.where(s > t, irfuse.ops.floor(s), irfuse.ops.sqrt(2.0) * irfuse.ops.tanh(t)) + 2.0 + s
        d = irfuse.ops.contract("ij,j->i", A, v) + A @ v + A @ v
        e = irfuse.ops.det(A) + irfuse.ops.trace(A) + irfuse.ops.norm(v) + v @ v
        f = irfuse.ops.inv(A) + irfuse.ops.transpose(A) + irfuse.ops.outer(v, v) - (-A)
        g = irfuse.ops.contract("ij->", A) + irfuse.ops.contract("i->", irfuse.ops.emul(v, v))
        return a, b, c, d, e, f, g

    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@written", "@spelled")
             for m in (compile_function(f).module for f in (spelled, written))]
    assert texts[0] == texts[1]
    rng = np.random.default_rng(12)
    A, v = rng.standard_normal((20, 3, 3)) + 3 * np.eye(3), rng.standard_normal((20, 3))
    s, t = rng.standard_normal(20), rng.standard_normal(20)
    got = irfuse.compile(spelled, backend="cpu", dtype="f64")(A, v, s, t)
    At, T = np.swapaxes(A, 1, 2), t[:, None]
    Av = np.einsum("nij,nj->ni", A, v)
    for value, want in ((got.a, np.sin(A) * np.exp(-np.abs(A))),
                        (got.b, np.maximum(v, T) - np.clip(v, -0.5, 0.5) + v * v - 1.0),
                        (got.c, np.where(s > t, np.floor(s), math.sqrt(2.0) * np.tanh(t)) + 2.0 + s),
                        (got.d, 3 * Av),
                        (got.e, np.linalg.det(A) + np.trace(A, axis1=1, axis2=2) + np.linalg.norm(v, axis=1)
                         + (v * v).sum(1)),
                        (got.f, np.linalg.inv(A) + At + np.einsum("ni,nj->nij", v, v) + A),
                        (got.g, A.sum((1, 2)) + (v * v).sum(1))):
        np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-12)

    def scalar_sum(s: irfuse.Scalar):  # (a scalar's entries' sum is the scalar)
        return np.sum(s) * 2

    np.testing.assert_array_equal(irfuse.compile(scalar_sum, backend="cpu", dtype="f64")(s).out0, s * 2)


def test_a_tuple_assigns_every_value_computed_before_any_target():
    """`a, b = x, y` is Python's: every value on the right computed before a target is
    assigned (`a, b = b, a` swaps, entries too); where no value reads a target before it, the
    same program as the lines one after the other."""

    def swapped(a: irfuse.Scalar, b: irfuse.Scalar, v: irfuse.Vector[3]):
        a, b = b, a * 2
        v[0], v[2] = v[2], v[0] + a
        c, d = a * b, b - 1
        return a, b, c, d, v

    def lines(a: irfuse.Scalar, b: irfuse.Scalar, v: irfuse.Vector[3]):
        c, d = a * b, b - 1
        return c, d

    def one_after_the_other(a: irfuse.Scalar, b: irfuse.Scalar, v: irfuse.Vector[3]):
        c = a * b
        d = b - 1
        return c, d

    prog = irfuse.compile(swapped, backend="cpu", dtype="f64")
    rng = np.random.default_rng(9)
    a, b, v = rng.random(20), rng.random(20), rng.random((20, 3))
    got = prog(a, b, v.copy())
    want = v.copy()
    want[:, 0], want[:, 2] = v[:, 2], v[:, 0] + b
    np.testing.assert_array_equal(got.a, b)
    np.testing.assert_array_equal(got.b, a * 2)
    np.testing.assert_array_equal(got.c, b * (a * 2))
    np.testing.assert_array_equal(got.d, a * 2 - 1)
    np.testing.assert_array_equal(got.v, want)
    texts = [canonical_ir(module_text(m), m.ops.first.outputs).replace("@one_after_the_other", "@lines")
             for m in (compile_function(f).module for f in (lines, one_after_the_other))]
    assert texts[0] == texts[1]


def test_a_loop_over_any_range_of_whole_numbers_runs_its_trips():
    """`range(a, b)` and `range(a, b, step)` (negative steps and bounds, names of the module)
    are loops of as many trips as Python's range holds: the program of `range(N)`."""
    def ranges(x: irfuse.Scalar):
        y = x
        for _ in range(2, 5):
            y = y * 2.0
        for _ in range(0, 7, 2):
            y = y + x
        for _ in range(LAST + 3, 0, -2):
            y = y * 3.0
        for _ in range(-LAST, 0):
            y = y - x
        return y

    def counted(x: irfuse.Scalar):
        y = x
        for _ in range(3):
            y = y * 2.0
        for _ in range(4):
            y = y + x
        for _ in range(3):
            y = y * 3.0
        for _ in range(2):
            y = y - x
        return y

    x = np.random.default_rng(9).random(7)
    got = irfuse.compile(ranges, backend="cpu", dtype="f64")(x)[0]
    np.testing.assert_allclose(got, ((x * 8 + 4 * x) * 27) - 2 * x, rtol=1e-14)
    ir = [compile_function(f).module for f in (ranges, counted)]
    assert canonical_ir(module_text(ir[0]), ()).replace("@ranges", "@counted") == canonical_ir(module_text(ir[1]), ())


def test_an_entry_of_an_entry_is_read_in_one_subscript():
    """`J[0, 1]`, `J[1][0]`, `X[q, 2, 1]` in an indexed loop and `J[LAST - 1, -1]`: NumPy's entries,
    each level but the last copied into a temporary (the program of `r = J[0]; r[1]`)."""
    def entries(J: irfuse.Matrix[2, 2], X: irfuse.Tensor[4, 3, 3], w: irfuse.Vector[4]):
        d = J[0, 0] * J[1, 1] - J[0, 1] * J[1][0]
        s = w[0] * 0
        for q in range(4):
            s = s + X[q, 2, 1] * w[q]
        return d, s, J[LAST - 1, -1]  # (an index's arithmetic of the module's whole numbers)

    def named(J: irfuse.Matrix[2, 2]):
        r = J[0]
        y = r[1]
        return y

    def subscripted(J: irfuse.Matrix[2, 2]):
        return J[0, 1]

    rng = np.random.default_rng(8)
    J, X, w = rng.random((5, 2, 2)), rng.random((5, 4, 3, 3)), rng.random((5, 4))
    d, s, last = irfuse.compile(entries, backend="cpu", dtype="f64")(J, X, w)
    np.testing.assert_allclose(d, np.linalg.det(J), rtol=1e-12)
    np.testing.assert_allclose(s, np.einsum("nq,nq->n", X[:, :, 2, 1], w), rtol=1e-14)
    assert np.array_equal(last, J[:, 1, 1])
    got = [irfuse.compile(f, backend="cpu", dtype="f64")(J)[0] for f in (named, subscripted)]
    assert np.array_equal(got[0], J[:, 0, 1]) and np.array_equal(got[1], J[:, 0, 1])


GRID = np.ones((3, 3))


def test_an_attribute_of_a_parameter_is_not_read_from_a_module_value_of_that_name():
    """`A.size` where `A` is a parameter is refused (the parameter shadows the module's array of
    the same name, as in Python); `GRID.size` of the module's array is its number, and an
    attribute whose reading raises is no number."""
    class Raising:
        @property
        def x(self):
            raise RuntimeError("read")

    broken = Raising()

    def shadowed(GRID: irfuse.Matrix[3, 3], s: irfuse.Scalar):
        return s * GRID.size

    def module_array(s: irfuse.Scalar):
        return s * GRID.size

    def raising(s: irfuse.Scalar):
        return s * broken.x

    for fn in (shadowed, raising):
        with pytest.raises(irfuse.CompileError, match="this expression cannot be traced"):
            irfuse.compile(fn, backend="cpu", dtype="f64")
    assert irfuse.compile(module_array, backend="cpu", dtype="f64")(np.array([2.0, 3.0])).out0.tolist() == [18.0, 27.0]


def test_a_matrix_product_of_a_square_and_another_matrix_is_the_generic_one():
    """`A @ B` of a 3x3 and a 3x2 matrix (and `A @ v` of a 2x3 matrix and a vector) is the
    generic product: the suffixed `mmul33` takes two 3x3 matrices, and the infix form once
    named it for any right operand (refused as `mmul33 ... cannot take (matrix3x3,
    matrix3x2)`). Found by the infix renderings of the differential test."""
    def products(A: irfuse.Matrix[3, 3], B: irfuse.Matrix[3, 2], C: irfuse.Matrix[2, 3], v: irfuse.Vector[3]):
        return A @ B, C @ v, A @ A, A @ v

    prog = irfuse.compile(products, backend="cpu", dtype="f64")
    rng = np.random.default_rng(0)
    A, B, C, v = (rng.standard_normal((4, *s)) for s in ((3, 3), (3, 2), (2, 3), (3,)))
    got = prog(A, B, C, v)
    for out, want in zip(got, (A @ B, np.einsum("nij,nj->ni", C, v), A @ A, np.einsum("nij,nj->ni", A, v))):
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)
