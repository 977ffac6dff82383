"""What a new user met calling irfuse (the third robustness review, on the CPU backend): the
derivative of a compiled program, positional mesh calls short of an argument, connectivities
as Python lists and of other integer types, `scatter=` values, structures of arrays through a
program of passes, timing a mesh program, subpackages as attributes, the tools' help."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.mesh import box_tetrahedra
from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)


@pytest.fixture(scope="module")
def residual():
    return irfuse.compile(str(EXAMPLES / "mesh" / "p1_residual.kas"), backend="cpu")


@pytest.fixture(scope="module")
def mesh():
    X, conn = box_tetrahedra(2)[:2]
    return X.astype(np.float32), conn


def test_the_derivative_of_a_compiled_program_is_compiled_with_its_options():
    """`irfuse.grad(prog, ...)` once said "irfuse.compile takes a path or KAS source text, not a
    Program"; a compiled program gives a compiled derivative now, with its element type and
    backend, and its values agree with the derivative compiled from the source."""
    prog = irfuse.compile(NEO_HOOKEAN_ENERGY, backend="cpu", dtype="f64")
    g = irfuse.grad(prog, of="E", wrt="F")
    assert isinstance(g, irfuse.Program) and g.outputs == ("E", "grad_F") and g.dtype == np.float64
    assert g.backend == "cpu"
    rng = np.random.default_rng(1)
    F = np.eye(3) + 0.1 * rng.uniform(-1, 1, (16, 3, 3))
    mu, lam = np.float64(1.0), np.float64(2.0)
    from_source = irfuse.compile(irfuse.grad(NEO_HOOKEAN_ENERGY, of="E", wrt="F"), backend="cpu", dtype="f64")
    assert g(F, mu, lam).grad_F.tobytes() == from_source(F, mu, lam).grad_F.tobytes()
    tangents = irfuse.jvp(prog, wrt="F")
    assert isinstance(tangents, irfuse.Program) and tangents.outputs == ("E", "dE")
    with pytest.raises(UsageError, match="irfuse.compile takes what it compiles .* not a compiled Program"):
        irfuse.compile(prog)
    with pytest.raises(UsageError, match="irfuse.vjp takes a path, KAS source text, a Python function or a kas "
                                         "module, not a int"):
        irfuse.vjp(3, wrt="F")


def test_a_positional_call_short_of_an_argument_says_which_does_not_fit(residual, mesh):
    """The residual's connectivity left out: once "missing input 'mu'" (the last); now also
    that argument 3, a float array, does not fit 'conn'."""
    X, conn = mesh
    with pytest.raises(UsageError, match=r"missing input 'mu' .*; argument 3, an array of float32 shaped \(4, 3\), "
                                         r"does not fit input 'conn', which takes a connectivity"):
        residual(X, X, DN, np.float32(1), np.float32(2))
    with pytest.raises(UsageError, match=r"argument 2, an array of int32 shaped \(48, 4\), does not fit input 'u'"):
        residual(X, conn, DN, np.float32(1), np.float32(2))


def test_connectivities_as_lists_are_taken_and_other_integer_types_refused(residual, mesh):
    X, conn = mesh
    args = (DN, np.float32(1.5), np.float32(0.7))
    want = residual(X, X, conn, *args).r
    assert residual(X, X, conn.tolist(), *args).r.tobytes() == want.tobytes()
    assert residual(X, X, conn.astype(np.int64), *args).r.tobytes() == want.tobytes()
    assert irfuse.mesh.Connectivity([list(map(int, row)) for row in conn], len(X)).conn.tobytes() == \
        conn.astype(np.int32).tobytes()
    for other in (np.uint32, np.int16, np.uint64):
        with pytest.raises(UsageError, match=rf"'conn' is a connectivity of {np.dtype(other).name} values; it takes "
                                             r"int32 or int64 node numbers \(pass conn.astype\(np.int32\)\)"):
            residual(X, X, conn.astype(other), *args)
        with pytest.raises(UsageError, match="int32 or int64"):
            irfuse.mesh.Connectivity(conn.astype(other), len(X))
    with pytest.raises(UsageError, match="a list of float64 values; a connectivity holds whole node numbers"):
        residual(X, X, [[0.5, 1, 2, 3]], *args)


@pytest.mark.parametrize("scatter", ["", "Ordered", 1])
def test_scatter_takes_ordered_or_atomic_only(residual, mesh, scatter):
    X, conn = mesh
    with pytest.raises(UsageError, match="scatter= is one of 'ordered', 'atomic', not"):
        residual(X, X, conn, DN, np.float32(1), np.float32(2), scatter=scatter)
    step = irfuse.compile(str(EXAMPLES / "mesh" / "explicit_step.kas"), backend="cpu")
    m = np.ones(len(X), np.float32)
    with pytest.raises(UsageError, match="scatter= is one of"):
        step(X, X, X, m, conn, DN, np.float32(1), np.float32(2), np.float32(1e-3), scatter=scatter)


PASSES_WITH_AN_UNREAD_INPUT = """
nodal vector3 X, r, t; nodal scalar Y; index4 conn; vector4 Ye; matrix4x3 F; scalar s, y; uniform matrix4x3 W;
input X, Y, conn, s, W;
Ye = gather(Y, conn);
y = vdot4(Ye, Ye);
y = smul(y, s);
F = scale(W, y);
r = scatter(F, conn);
t = scale(r, 2);
return t;
"""


def test_a_structure_of_arrays_that_no_pass_reads_still_sets_the_calls_layout():
    """X, never read, is the one argument shaped as a structure of arrays (the others fit
    both layouts): the outputs of a program of passes once came back as arrays of structures,
    because no pass saw X. They follow the call's layout now, and X is checked as well."""
    with pytest.warns(irfuse.IrfuseWarning, match="input 'X' is never used"):
        prog = irfuse.compile(PASSES_WITH_AN_UNREAD_INPUT, backend="cpu")
    rng = np.random.default_rng(0)
    nodes, elements = 20, 30
    conn = rng.integers(0, nodes, (elements, 4)).astype(np.int32)
    Y, s = rng.random(nodes).astype(np.float32), rng.random(elements).astype(np.float32)
    W = rng.random((4, 3)).astype(np.float32)
    aos = prog(rng.random((nodes, 3)).astype(np.float32), Y, conn, s, W).t
    soa = prog(rng.random((3, nodes)).astype(np.float32), Y, conn, s, W).t
    assert aos.shape == (nodes, 3) and soa.shape == (3, nodes) and soa.T.tobytes() == aos.tobytes()
    with pytest.raises(UsageError, match=r"input 'X' has shape \(3, 20\), structure of arrays"):
        prog(rng.random((3, nodes)).astype(np.float32), Y, conn, s[:, None], W)


def test_programs_over_a_mesh_are_timed_with_a_connectivity(residual, mesh):
    """`prog.time` once refused a `Connectivity`, and a program with nodal statements had no
    `time`: both time whole calls now."""
    X, conn = mesh
    prepared = irfuse.mesh.Connectivity(conn, len(X))
    times = residual.time(X, X, prepared, DN, np.float32(1), np.float32(2), repeat=3, warmup=1)
    assert len(times) == 3 and all(t > 0 for t in times)
    step = irfuse.compile(str(EXAMPLES / "mesh" / "explicit_step.kas"), backend="cpu")
    m = np.ones(len(X), np.float32)
    times = step.time(X, X, X, m, prepared, DN, np.float32(1), np.float32(2), np.float32(1e-3), repeat=2)
    assert len(times) == 2 and all(t > 0 for t in times)


def test_subpackages_are_attributes_after_import_irfuse_alone():
    code = ("import irfuse, numpy as np\n"
            "print(irfuse.mesh.Connectivity(np.array([[0, 1, 2, 3]]), 4).nodes)\n"
            "print(callable(irfuse.dask.apply))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.split() == ["4", "True"], p.stderr


def test_the_help_says_tune_runs_on_either_backend():
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200"})
    assert "time each on the backend (the GPU, or the CPU with --backend cpu)" in p.stdout, p.stdout
