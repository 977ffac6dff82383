"""Derivative programs checked against central differences of their program, and against each
other, in float64.

`jvp_against_differences(source, ...)` builds a program's forward derivative along every
input that has one, evaluates it with the float64 reference (`run_reference`: every op's
definition on the whole batch, no compilation), and compares each output tangent with the
central difference `(f(x + h t) - f(x - h t)) / 2h` of the program itself. An entry where
the program is not smooth near x (a branch, a tie of a maximum, a kink of `abs`, within
h of the point) is one where two step sizes disagree: it is counted as skipped, not compared
(a difference quotient says nothing there); so is one where the program is not finite.

`vjp_against_jvp(source, ...)` is the dot-product test: for random tangents t of the inputs
and cotangents c of the outputs, the reverse derivative's <vjp(c), t> equals the forward
derivative's <c, jvp(t)> up to rounding (both linear maps at one point, no differences taken);
`loops` picks how the reverse derivative differentiates loops (unrolled, taped).
"""

from __future__ import annotations

from dataclasses import field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from irfuse.artifact.records import record
from irfuse.dialects.kas import IndexType, MaskType, is_uniform, program_of
from irfuse.driver.front import frontend
from irfuse.driver.sources import Source
from irfuse.library.catalogue import default_library
from irfuse.planner.loop_forms import LOOP_JUDGE
from irfuse.transforms.forward_mode import forward_derivative
from irfuse.transforms.reverse_mode import reverse_derivative
from irfuse.verification.reference import program_indices, random_inputs, run_reference

# A compressible Neo-Hookean energy, W per element and E their sum: the derivative tests' and
# `benchmarks/derivatives.py`'s program.
NEO_HOOKEAN_ENERGY = """
matrix3x3 F, C; scalar J, logJ, W, t; uniform scalar mu, lam, E;
input F, mu, lam;
J = det(F);
logJ = log(J);
C = mtmul(F, F);
t = trace(C);
W = sub(t, 3);
W = smul(W, mu);
t = smul(logJ, logJ);
t = smul(t, lam);
W = add(W, t);
W = scale(W, 0.5);
t = smul(logJ, mu);
W = sub(W, t);
E = sum(W);
return E;
"""

# A nonlinear time loop with a batch-wide step h: 40 steps of 3 words are 120 words of history,
# so a taped loop is split into checkpointed segments (4 + 6 x 6 once; the planner's price splits
# it further); the loop tests' and `benchmarks/loop_derivatives.py`'s program.
TIME_LOOP = """
matrix3x3 A; vector3 x, y; scalar e; uniform scalar E, h;
input A, x, h;
loop 40 {
  y = mvmul33(A, x);
  y = tanh(y);
  y = svmul3(y, h);
  x = vadd3(x, y);
}
e = vdot3(x, x);
E = sum(e);
return E, x;
"""


# A loop carrying one scalar (4 statements a step): its unrolled derivative keeps few words an
# element live at once however many statements it makes (loops=auto unrolls it at 40 steps).
SCALAR_LOOP = """
scalar x, a, y; uniform scalar E, h;
input x, a, h;
loop 40 {
  y = smul(a, x);
  y = tanh(y);
  y = smul(y, h);
  x = add(x, y);
}
y = smul(x, x);
E = sum(y);
return E, x;
"""


# A mesh energy whose nodal statements on the scatter's sums are not linear: its reverse
# derivative gathers the cotangent of the sums (a second pass over the elements).
NODAL_AFTER_SCATTER = """
nodal vector3 u, r, p; nodal scalar q; matrix4x3 ue, fe; index4 conn; uniform scalar E, k;
input u, conn, k;
ue = gather(u, conn);
fe = scale(ue, k);
r = scatter(fe, conn);
p = tanh(r);
q = vdot3(p, r);
E = sum(q);
return E, p;
"""


def random_differentiable_programs(kind: str, seed: int) -> str:
    """A random program of each generator the derivative tests run: `loops`, `batch_wide`,
    `element` (codes with branches and indexed loops), `mesh`, `carried` (loops that carry
    values from one iteration to the next: what reverse mode tapes), `mesh_tangents` (mesh
    programs whose tangent matrices can be taken)."""
    from irfuse.testing.random_programs import random_element_program, random_mesh_program, random_program

    if kind == "loops":
        return random_program(seed, 9)
    if kind == "batch_wide":
        return random_program(seed, 9, batch_wide=True)
    if kind == "element":
        return random_element_program(seed, 9)
    if kind == "mesh":
        return random_mesh_program(seed, 7)
    if kind == "mesh_tangents":
        return random_mesh_program(seed, 7, for_tangents=True)
    if kind == "carried":
        return random_program(seed, 12, loop_rate=0.6, dense=seed % 2 == 0, batch_wide=seed % 2 == 1)
    raise ValueError(f"no generator '{kind}'")


GENERATORS = ("batch_wide", "carried", "element", "loops", "mesh")

STEPS = (1e-6, 1e-5)  # the difference quotient's step, and the one that tells kinks


@record
class DerivativeCheck:
    compared: int = 0  # output entries compared
    skipped: int = 0  # entries where the program is not smooth or not finite near the point
    mismatches: list[str] = field(default_factory=list)


def float64_inputs(program, n: int, seed: int) -> tuple[dict, int | None]:
    """Random float64 inputs of `program` on `n` elements and its node count: a mesh's drawn as
    the differential tests draw them (`random_mesh_inputs`), else `random_inputs` (None nodes)."""
    if program_indices(program):
        from irfuse.testing.differential import random_mesh_inputs

        return random_mesh_inputs(program, n, seed, np.float64)
    return random_inputs(program, n, seed, np.float64), None


def vjp_against_jvp(source: str, n: int = 64, seed: int = 0, wrt: list[str] | None = None,
                    loops: str = "auto") -> DotProducts:
    """The dot-product test of KAS `source` along its differentiable inputs (or `wrt`), with
    random inputs, tangents and cotangents. Rows (elements, nodes) where a term is not finite
    (log of a negative, ...) are left out of both sides; where a batch-wide term is not finite,
    or rows are left out and a batch-wide term sums over them, the test cannot be made (`made`
    False)."""
    program = program_of(frontend(Source(source, "<derivative check>")).module)
    wrt = wrt if wrt is not None else differentiable_inputs(program)
    forward = forward_derivative(program, wrt, default_library())
    reverse = reverse_derivative(program, wrt, default_library(), loops=loops, judge=LOOP_JUDGE)
    ModuleOp([forward])
    ModuleOp([reverse])
    inputs, nodes = float64_inputs(program, n, seed)
    rng = np.random.default_rng(seed + 1)
    tangents = {k: rng.uniform(-1.0, 1.0, size=np.shape(inputs[k])) for k in wrt}
    base = run_reference(program, inputs, n, nodes=nodes)
    cotangents = {k: rng.uniform(-1.0, 1.0, size=np.shape(base[k])) for k in program.outputs}
    ret = program.return_op
    whole = {k for k, v in zip(program.outputs, ret.values) if is_uniform(v)} | set(program.uniform)
    with np.errstate(all="ignore"):
        jvp = run_reference(forward, {**inputs, **{"d" + k: v for k, v in tangents.items()}}, n, nodes=nodes)
        vjp = run_reference(reverse, {**inputs, **{"bar_" + k: v for k, v in cotangents.items()}}, n, nodes=nodes)
        left = [(k, cotangents[k] * np.asarray(jvp["d" + k])) for k in program.outputs]
        right = [(k, np.asarray(vjp["bar_" + k]) * tangents[k]) for k in wrt]
    rows: dict[int, np.ndarray] = {}  # batch length -> rows with a term not finite
    for k, t in left + right:
        if k in whole:
            continue
        bad = ~np.isfinite(t.reshape(t.shape[0], -1)).all(axis=1)
        rows[t.shape[0]] = rows.get(t.shape[0], np.zeros(t.shape[0], bool)) | bad

    def total(terms) -> tuple[float, float]:
        value = magnitude = 0.0
        for k, t in terms:
            if k not in whole:
                t = np.where(rows[t.shape[0]].reshape((-1,) + (1,) * (t.ndim - 1)), 0.0, t)
            value += float(np.sum(t))
            magnitude += float(np.sum(np.abs(t)))
        return value, magnitude

    (lv, lm), (rv, rm) = total(left), total(right)
    skipped = int(sum(np.count_nonzero(r) for r in rows.values()))
    # A batch-wide term sums over every row, those left out included: comparable only if none is.
    coupled = skipped and any(k in whole for k, _ in left + right)
    return DotProducts(lv, rv, lm + rm, bool(np.isfinite(lv + rv + lm + rm)) and not coupled, skipped)


@record
class DotProducts:
    forward: float  # <c, jvp(t)>
    reverse: float  # <vjp(c), t>
    magnitude: float  # the sum of the magnitudes of their terms
    made: bool  # False where a batch-wide term is not finite or sums over rows left out
    skipped: int  # rows left out

    def agree(self, rtol: float = 1e-12) -> bool:
        return abs(self.forward - self.reverse) <= rtol * self.magnitude


@record
class JacobianCheck:
    compared: int = 0  # (output, input) pairs compared
    refused: list[str] = field(default_factory=list)  # pairs the Jacobian refuses, and why
    mismatches: list[str] = field(default_factory=list)


def jacobian_against_jvp(source: str, n: int = 16, seed: int = 0) -> JacobianCheck:
    """Checks the per-element Jacobian (`transforms.jacobian`) of every per-element output of
    KAS `source` by every per-element input against its forward derivative along each unit
    direction of that input (the float64 reference, `run_reference`): the Jacobian is one an
    element, shaped (n, *y, *x), and entry [..., k] is the tangent along e_k, to rounding. A
    pair the Jacobian refuses (a loop, a gather, a reduction over the batch the output reads,
    too many axes) is listed with why."""
    from irfuse.diagnostics import CompileError, UsageError
    from irfuse.transforms.jacobian import jacobian_program

    program = program_of(frontend(Source(source, "<jacobian check>")).module)
    check = JacobianCheck()
    if program_indices(program):
        check.refused.append("a program over a mesh")
        return check
    inputs = random_inputs(program, n, seed, np.float64)
    ret = program.return_op
    outputs = [k for k, v in zip(program.outputs, ret.values) if not is_uniform(v) and not isinstance(v.type, MaskType)]
    for x in [k for k in differentiable_inputs(program) if k not in program.uniform]:
        for y in outputs:
            try:
                jac = jacobian_program(program, y, [x], default_library())
            except (CompileError, UsageError) as e:
                check.refused.append(f"d{y}/d{x}: {e}")
                continue
            forward = forward_derivative(program, [x], default_library())
            ModuleOp([jac])
            ModuleOp([forward])
            with np.errstate(all="ignore"):
                got = np.asarray(run_reference(jac, inputs, n)[f"d{y}_d{x}"])
                shape = np.shape(inputs[x])[1:]
                y_shape = tuple(getattr(ret.values[program.outputs.index(y)].type, "shape", ()))
                if np.shape(got) != (n, *y_shape, *shape):
                    check.mismatches.append(f"d{y}/d{x} is shaped {np.shape(got)}, not {(n, *y_shape, *shape)}: one "
                                            "an element")
                for k, entry in enumerate(np.ndindex(*shape)):
                    unit = np.zeros(np.shape(inputs[x]))
                    unit[(slice(None), *entry)] = 1.0
                    want = np.asarray(run_reference(forward, {**inputs, "d" + x: unit}, n)["d" + y])
                    have = got[(Ellipsis, *entry)] if entry else got
                    # (where the forward derivative is not finite, it multiplied a value that is
                    # not by a 0 of the direction, which the Jacobian's structural zero leaves 0:
                    # `library.known_words`; compared where it is)
                    finite = np.isfinite(want)
                    if not np.allclose(have[finite], want[finite], rtol=1e-12, atol=1e-12):
                        check.mismatches.append(f"d{y}/d{x} at {entry}: {np.max(np.abs(have - want)[finite])}")
            check.compared += 1
    return check


def differentiable_inputs(program) -> list[str]:
    return [name for name, a in zip(program.inputs, program.body.block.args)
            if not isinstance(a.type, (MaskType, IndexType))]


def against_differences(got, fine, coarse, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """(where the program is smooth: the central differences of the two steps `STEPS` agree
    and all is finite; where `got` differs there from the fine difference beyond `rtol` and
    the two quotients' own disagreement)."""
    scale = np.maximum(np.abs(fine), np.abs(coarse)) + 1.0
    smooth = np.isfinite(fine) & np.isfinite(coarse) & np.isfinite(got) & (np.abs(fine - coarse) <= 1e-4 * scale)
    return smooth, smooth & (np.abs(got - fine) > rtol * scale + 1e-3 * np.abs(fine - coarse))


def jvp_against_differences(source: str, n: int = 64, seed: int = 0, rtol: float = 1e-5) -> DerivativeCheck:
    """Checks the forward derivative of KAS `source` along all its differentiable inputs on
    `n` random elements (inputs uniform in [-1, 1), tangents too; a mesh's connectivities as
    the differential tests draw them)."""
    program = program_of(frontend(Source(source, "<derivative check>")).module)
    wrt = differentiable_inputs(program)
    derived = forward_derivative(program, wrt, default_library())
    ModuleOp([derived])  # (the reference asks the module for nothing, but the IR wants a parent)
    inputs, nodes = float64_inputs(program, n, seed)
    rng = np.random.default_rng(seed + 1)
    tangents = {name: rng.uniform(-1.0, 1.0, size=np.shape(inputs[name])) for name in wrt}
    got = run_reference(derived, {**inputs, **{"d" + k: v for k, v in tangents.items()}}, n, nodes=nodes)

    def moved(h: float) -> dict[str, np.ndarray]:
        up = run_reference(program, {k: v + h * tangents[k] if k in tangents else v for k, v in inputs.items()}, n,
                           nodes=nodes)
        down = run_reference(program, {k: v - h * tangents[k] if k in tangents else v for k, v in inputs.items()}, n,
                             nodes=nodes)
        return {k: (up[k] - down[k]) / (2 * h) for k in program.outputs}

    with np.errstate(all="ignore"):
        fine, coarse = moved(STEPS[0]), moved(STEPS[1])
        out = DerivativeCheck()
        for name in program.outputs:
            t, f, c = np.asarray(got["d" + name]), fine[name], coarse[name]
            smooth, bad = against_differences(t, f, c, rtol)
            out.skipped += int(np.size(f) - np.count_nonzero(smooth))
            out.compared += int(np.count_nonzero(smooth))
            if np.any(bad):
                where = np.argwhere(bad)[0]
                k = tuple(int(i) for i in where)
                out.mismatches.append(f"d{name}{list(k)}: derivative {t[k]!r}, central difference {f[k]!r} "
                                      f"({np.count_nonzero(bad)} entries differ)")
    return out


def tangent_against_differences(source: str, n: int = 24, seed: int = 0, rtol: float = 1e-5) -> JacobianCheck:
    """Checks `irfuse.tangent_matrix` (the CPU backend, float64) of every nodal output of KAS
    `source` by every nodal input, on a random mesh as the differential tests draw them,
    against central differences of the program along a random direction v: M v against
    (r(x + h v) - r(x - h v)) / 2h, node by node where the quotients of two steps agree (no
    kink), and its values against the NumPy reference's assembly of the element blocks, bit
    for bit (the owner-computes kernel adds in the reference's order); with Dirichlet
    conditions (`_fixed_forms`) the matrix and the diagonal as their conditions make them from
    the plain ones. A pair the tangent refuses (an output that is no scatter's, nodal statements, an
    input gathered twice or in a loop, blocks that are not square) is listed with why."""
    from irfuse.api import compile
    from irfuse.api.tangents import _element_blocks, tangent_matrix
    from irfuse.diagnostics import CompileError, UsageError
    from irfuse.mesh.assembly import assemble

    program = program_of(frontend(Source(source, "<tangent check>")).module)
    check = JacobianCheck()
    if not program_indices(program):
        check.refused.append("not a program over a mesh")
        return check
    inputs, nodes = float64_inputs(program, n, seed)
    compiled = compile(source, backend="cpu", dtype="f64")
    rng = np.random.default_rng(seed + 2)
    for x in [k for k in compiled.inputs if k in compiled.nodal]:
        v = rng.uniform(-1.0, 1.0, np.shape(inputs[x]))
        for y in [k for k in compiled.outputs if k in compiled.nodal]:
            try:
                matrix = tangent_matrix(compiled, **inputs, wrt=x, of=y)
            except (CompileError, UsageError) as e:
                check.refused.append(f"d{y}/d{x}: {e}")
                continue

            def moved(h: float, x=x, y=y, v=v) -> np.ndarray:
                up = compiled(**{**inputs, x: inputs[x] + h * v}, nodes=nodes)[y]
                down = compiled(**{**inputs, x: inputs[x] - h * v}, nodes=nodes)[y]
                return (np.asarray(up) - np.asarray(down)) / (2 * h)

            blocks, conn = _element_blocks(compiled, (), inputs, x, y, None, "tangent check")[:2]
            if matrix.data.tobytes() != assemble(blocks, conn.conn, conn.nodes).data.tobytes():
                check.mismatches.append(f"d{y}/d{x}: the values are not the reference assembly's bits (each entry's "
                                        "terms in ascending element order)")
            check.mismatches += _diagonal_program(compiled, inputs, nodes, x, y, blocks, conn)
            with np.errstate(all="ignore"):
                fine, coarse = moved(STEPS[0]), moved(STEPS[1])
                got = np.asarray(matrix @ v.reshape(-1)).reshape(fine.shape)
                _, bad = against_differences(got, fine, coarse, rtol)
            if np.any(bad):
                k = tuple(int(i) for i in np.argwhere(bad)[0])
                check.mismatches.append(f"d{y}/d{x} at {list(k)}: M v {got[k]!r}, central difference {fine[k]!r}")
            check.mismatches += _fixed_forms(compiled, inputs, x, y, matrix, seed)
            check.compared += 1
    return check


def _diagonal_program(compiled, inputs: dict, nodes: int, x: str, y: str, blocks, conn) -> list[str]:
    """The program of the tangent's diagonal over the mesh (`_Jacobian.diagonal`, what
    `irfuse.diagonal` runs where no element names a node twice), run on this mesh whether or
    not one does: each element's block entries (a, i, a, i) added at its node a, to rounding
    (another order of the same sums); the NumPy reference adds them from the blocks."""
    from irfuse.api.tangents import _jacobian_of

    if blocks.shape[1:3] != blocks.shape[3:5]:
        return []
    program, out = _jacobian_of(compiled, y, x, "tangent check").diagonal
    got = np.asarray(program(**{n: inputs[n] for n in program.inputs}, nodes=nodes)[out]).reshape(nodes, -1)
    rows = np.einsum("eaiai->eai", blocks)
    want = np.zeros((nodes, rows.shape[2]))
    np.add.at(want, np.asarray(conn.conn), rows)
    scale = np.nanmax(np.abs(want), initial=0.0)
    with np.errstate(invalid="ignore"):
        apart = np.abs(got - want) > 1e-10 * scale
    if np.any(apart | (np.isnan(got) != np.isnan(want))):
        k = tuple(int(i) for i in np.argwhere(apart | (np.isnan(got) != np.isnan(want)))[0])
        return [f"d{y}/d{x}: the diagonal's program at {list(k)}: {got[k]!r}, the blocks' diagonal {want[k]!r}"]
    return []


def _fixed_forms(compiled, inputs: dict, x: str, y: str, matrix, seed: int) -> list[str]:
    """Dirichlet conditions on a random quarter of `x`'s components (`api.dirichlet`), given
    as flat indices to the matrix and as a mask to the diagonal: the matrix is `matrix` with
    identity rows and columns there and its other entries' bits, the diagonal 1 there and the
    unconditioned diagonal's bits elsewhere, and that diagonal the matrix's to rounding (its own
    program where no element names a node twice: another order of the same sums). (Blocks
    that are not square take no `fixed`.)"""
    from irfuse.api.tangents import diagonal, tangent_matrix

    if matrix.shape[0] != matrix.shape[1]:
        return []
    fixed = np.random.default_rng(seed + 3).random(np.shape(inputs[x])) < 0.25
    flat = fixed.reshape(-1)
    held = tangent_matrix(compiled, **inputs, wrt=x, of=y, fixed=np.flatnonzero(fixed)).toarray()
    free = np.where(flat[:, None] | flat[None, :], 0.0, matrix.toarray())
    free[flat, flat] = 1.0
    found = []
    if not np.array_equal(held, free, equal_nan=True):
        found.append(f"d{y}/d{x} with fixed=: not the matrix with identity rows and columns at the fixed components")
    plain, conditioned = (np.asarray(diagonal(compiled, **inputs, wrt=x, of=y, fixed=f)).reshape(-1) for f in (None, fixed))
    want = matrix.diagonal()
    scale = np.nanmax(np.abs(want), initial=0.0)
    with np.errstate(invalid="ignore"):
        apart = np.abs(plain - want) > 1e-10 * scale
    if np.any(apart | (np.isnan(plain) != np.isnan(want))):
        found.append(f"d{y}/d{x}: the diagonal is not the matrix's (to rounding)")
    if not (np.all(conditioned[flat] == 1.0) and
            np.array_equal(conditioned[~flat], plain[~flat], equal_nan=True)):
        found.append(f"d{y}/d{x}: the diagonal with fixed= is not 1 there and the diagonal's bits elsewhere")
    return found
