"""`irfuse.time_loop` on one device: the steps' outputs named in `carry` fed back as inputs.
On the CPU backend here (the GPU's captured loop: `test_gpu.py`): the bits of the same steps
called one by one, the caller's arrays never written, and bad loops refused by name."""

import os

import numpy as np
import pytest
from conftest import ROOT, copy_past_a_boundary, recorded

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.mesh import Connectivity, box_tetrahedra

STEP = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)


def _mesh(seed: int = 1):
    X, conn = box_tetrahedra(3, numbering="random", seed=seed)
    rng = np.random.default_rng(seed)
    X = X.astype(np.float32)
    u = (1e-3 * rng.standard_normal(X.shape)).astype(np.float32)
    v = (1e-2 * rng.standard_normal(X.shape)).astype(np.float32)
    m = rng.uniform(0.5, 1.5, len(X)).astype(np.float32)
    return dict(X=X, u=u, v=v, m=m, conn=Connectivity(conn, len(X)), dN=DN, lam=1.5, mu=0.75)


@pytest.fixture(scope="module")
def step():
    return irfuse.compile(STEP, backend="cpu")


@pytest.mark.parametrize("steps", [1, 2, 7])
def test_a_time_loop_gives_the_bits_of_its_steps_called_one_by_one(step, steps):
    args = _mesh()
    before = {k: a.copy() for k, a in args.items() if isinstance(a, np.ndarray)}
    u, v = args.pop("u"), args.pop("v")
    uu, vv = u, v
    for _ in range(steps):
        uu, vv = step(u=uu, v=vv, dt=1e-3, **args)
    got = irfuse.time_loop(step, steps, {"u": "u1", "v": "v1"}, u=u, v=v, dt=1e-3, **args)
    assert got.u1.tobytes() == uu.tobytes() and got.v1.tobytes() == vv.tobytes()
    assert not np.array_equal(got.u1, u)  # (it moved)
    assert all(np.array_equal(a, {**args, "u": u, "v": v}[k]) for k, a in before.items())  # inputs unwritten


def test_a_time_loop_of_a_program_over_a_batch_feeds_one_output_back():
    """A rotation applied `steps` times; the output not carried is the last step's."""
    prog = irfuse.compile("vector3 x, y; scalar s; uniform scalar h; input x, h;\n"
                          "y = svmul3(x, h);\ny = vadd3(y, x);\ns = vdot3(y, y);\nreturn y, s;", backend="cpu")
    x = np.random.default_rng(0).standard_normal((100, 3)).astype(np.float32)
    y = x
    for _ in range(5):
        y, s = prog(y, 0.25)
    got = irfuse.time_loop(prog, 5, {"x": "y"}, x, 0.25)
    assert got.y.tobytes() == y.tobytes() and got.s.tobytes() == s.tobytes()


@pytest.mark.parametrize("steps, carry, message", [
    (0, {"u": "u1"}, "steps is a positive whole number below 2\\^63, not 0"),
    (2.0, {"u": "u1"}, "steps is a positive whole number"),
    (2**63, {"u": "u1"}, "steps is a positive whole number below 2\\^63, not 9223372036854775808"),
    (2, {}, "carry maps inputs to the outputs"),
    (2, {"u": "w1"}, r"carry 'u': 'w1' maps an input"),
    (2, {"q": "u1"}, r"carry 'q': 'u1' maps an input"),
    (2, {"m": "u1"}, r"feeds nodal values shaped \(3,\) to nodal input 'm' shaped \(\)"),
    (2, {"u": "u1", "v": "u1"}, "feeds one output to two inputs"),
])
def test_a_bad_time_loop_is_refused_by_name(step, steps, carry, message):
    with pytest.raises(UsageError, match=message):
        irfuse.time_loop(step, steps, carry, dt=1e-3, **_mesh())
    with pytest.raises(UsageError, match="time_loop takes a compiled program .irfuse.compile., not a str"):
        irfuse.time_loop("examples/mesh/explicit_step.kas", steps, carry, dt=1e-3, **_mesh())


# Calls again on the same arrays (the fast path a loop's calls take) ----------------------------

SCALED = "vector3 x, y; uniform scalar h, k; input x, h, k;\ny = svmul3(x, h);\ny = vadd3(y, x);\ny = svmul3(y, k);\nreturn y;"


def test_calls_again_on_the_same_arrays_follow_their_values_and_the_numbers():
    """From the second call on the same arrays the CPU backend's fast path runs them: new
    values in the arrays, new numbers for the scalars, out= or not, give a fresh call's bits;
    an array reshaped in place or a number that does not fit goes back to the checks."""
    prog = irfuse.compile(SCALED, backend="cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 3)).astype(np.float32)
    y = np.empty_like(x)
    for k in range(6):
        x[k] += 1.0
        h = 0.25 * k
        got = prog(x, h, 2.0, out=y)
        assert got.y is y and prog._host_fast
        assert y.tobytes() == prog(x.copy(), np.float32(h), np.float32(2.0)).y.tobytes(), k
    made = [prog(x, 0.5, k=3) for _ in range(3)]
    assert len({id(m.y) for m in made}) == 3
    assert all(m.y.tobytes() == prog(x.copy(), np.float32(0.5), np.float32(3)).y.tobytes() for m in made)
    with pytest.raises(UsageError, match=r"input 'h' is 1e\+300"):
        prog(x, 1e300, 2.0, out=y)
    x.shape = (100, 9)
    with pytest.raises(UsageError, match="input 'x'"):
        prog(x, 0.5, 2.0, out=y)


def test_a_mesh_call_again_on_the_same_arrays_follows_their_values():
    res = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cpu")
    args = _mesh()
    X, u, c = args["X"], args["u"], args["conn"]
    r = np.empty_like(u)
    for k in range(4):
        u *= 1.5
        res(X, u, c, DN, 1.5, 0.75 + k, out=r)
        assert r.tobytes() == res(X.copy(), u.copy(), c, DN, np.float32(1.5), np.float32(0.75 + k)).r.tobytes(), k
    assert res._host_fast


def test_a_program_of_passes_called_again_follows_its_arrays_and_numbers(step):
    """The explicit step called again on the same arrays with out= (each pass's fast path, the
    whole call's, then its passes replayed): new values and a new time step give a fresh
    call's bits; a number beyond float32 is still refused by name."""
    args = _mesh()
    out = [np.empty_like(args["u"]), np.empty_like(args["v"])]
    seen, returned = [], []
    for k in range(5):
        args["u"] *= 1.25
        dt = 1e-3 * (k + 1)
        got = step(**args, dt=dt, out=out)
        assert got[0] is out[0] and got[1] is out[1] and got.u1 is out[0]
        returned.append(got)
        seen.append((args["u"].copy(), dt, [a.copy() for a in got]))
    assert step._fast and step._fast[0].replay is not None  # (the passes replayed from the third call)
    assert returned[3] is returned[4]  # (calls again into out=: one Outputs of the caller's arrays)
    for k, (u, dt, got) in enumerate(seen):
        fresh = {name: (a.copy() if isinstance(a, np.ndarray) else a) for name, a in args.items()}
        want = step(**{**fresh, "u": u}, dt=np.float32(dt))
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want)), k
    with pytest.raises(UsageError, match=r"input 'dt' is 1e\+300"):
        step(**args, dt=1e300, out=out)


def test_closing_a_program_of_passes_lets_go_of_what_its_calls_keep():
    """`close` drops the kept calls (and their replays or graphs) and the arrays between
    passes; the next call opens everything again and gives the same bits."""
    step = irfuse.compile(STEP, backend="cpu")
    args = _mesh(3)
    out = [np.empty_like(args["u"]), np.empty_like(args["v"])]
    for _ in range(3):
        step(**args, dt=1e-3, out=out)
    first = [a.copy() for a in out]
    assert step._fast and step._between
    step.close()
    assert not step._fast and not step._between and "_time_loops" not in step.__dict__
    again = step(**args, dt=1e-3)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))


# Calls again on new arrays alike the last call's (a loop feeding outputs back) ----------------


def test_a_loop_feeding_a_steps_outputs_back_replays_its_passes(step, monkeypatch):
    """`u, v = step(X, u, v, ...)` without out= on the CPU: each call's u and v are the last
    call's outputs, new arrays alike the first call's, and from the third call the passes are
    replayed on them into outputs made by the call; the bits are `irfuse.time_loop`'s. A u
    that is not 16-byte aligned, or not contiguous, or one array given for u and v, takes the
    whole call's way and gives a fresh call's bits."""
    from irfuse.api.staged_programs import _PassesReplay

    args = _mesh(4)
    X, u0, v0, m, c = args["X"], args["u"], args["v"], args["m"], args["conn"]
    replays = recorded(monkeypatch, _PassesReplay, "run")
    u, v = u0, v0
    for _ in range(9):
        u, v = step(X, u, v, m, c, DN, 1.5, 0.75, 1e-3)
    assert len(replays) == 7
    want = irfuse.time_loop(step, 9, {"u": "u1", "v": "v1"}, X, u0, v0, m, c, DN, 1.5, 0.75, 1e-3)
    assert u.tobytes() == want.u1.tobytes() and v.tobytes() == want.v1.tobytes()
    strided = np.empty((len(u), 6), np.float32)[:, :3]
    strided[...] = u
    for odd_u, odd_v in ((copy_past_a_boundary(u, 4), v), (strided, v), (u, u)):
        replays.clear()
        got = step(X, odd_u, odd_v, m, c, DN, 1.5, 0.75, 1e-3)
        fresh = step(X, np.array(odd_u), np.array(odd_v), m, c, DN, np.float32(1.5), np.float32(0.75),
                     np.float32(1e-3), out=[np.empty_like(u), np.empty_like(v)])
        assert not replays and all(a.tobytes() == b.tobytes() for a, b in zip(got, fresh))
    replays.clear()
    for _ in range(3):  # (after the odd calls: alike again, replayed again)
        u, v = step(X, u, v, m, c, DN, 1.5, 0.75, 2e-3)
    assert replays


def test_a_call_on_a_new_array_alike_the_last_replays_its_run(monkeypatch):
    """A program of one pass and one over a mesh, called without out= on a new array at
    every call (`x = prog(x, ...).y`, `u = u + h * r`): the recorded run replayed on it (the
    fast path's `_alike`), each result a fresh call's bits; an array not alike takes the
    whole call's way."""
    from irfuse.api.host_calls import HostFastCall

    alike = recorded(monkeypatch, HostFastCall, "_alike")
    prog = irfuse.compile(SCALED, backend="cpu")
    x0 = np.random.default_rng(1).standard_normal((300, 3)).astype(np.float32)
    x = x0
    for _ in range(6):
        x = prog(x, 0.25, 0.5).y
    assert alike.count(True) >= 4
    assert x.tobytes() == irfuse.time_loop(prog, 6, {"x": "y"}, x0, 0.25, 0.5).y.tobytes()
    res = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cpu")
    args = _mesh(5)
    X, u, c = args["X"], args["u"], args["conn"]
    alike.clear()
    seen = []
    for k in range(6):
        r = res(X, u, c, DN, 1.5, 0.75).r
        seen.append((u, r))
        u = u + np.float32(1e-3) * r
    assert alike.count(True) >= 4
    alike.clear()
    seen.append((u, res(X, copy_past_a_boundary(u, 4), c, DN, 1.5, 0.75).r))
    assert alike and not any(alike)  # (every kept call refused it)
    for k, (u_k, r) in enumerate(seen):
        want = res(X.copy(), u_k.copy(), c, DN, np.float32(1.5), np.float32(0.75), out=np.empty_like(u)).r
        assert r.tobytes() == want.tobytes(), k


def test_threads_calling_one_program_on_arrays_alike_each_get_their_own_results(step):
    """Four threads calling the same programs without out= on arrays of their own, alike one
    another (each call may take the fast path another thread's call kept): every result is
    the one a call alone gives (what a fast call's match finds, its launch reads under the
    program's lock)."""
    from concurrent.futures import ThreadPoolExecutor

    prog = irfuse.compile(SCALED, backend="cpu")
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((300, 3)).astype(np.float32) for _ in range(4)]
    meshes = [_mesh(10 + k) for k in range(4)]
    base = meshes[0]
    for mesh in meshes[1:]:  # (one mesh, four states of it: arrays alike)
        mesh.update(X=base["X"], conn=base["conn"], m=base["m"])
    want_y = [prog(x.copy(), np.float32(0.5), np.float32(2.0), out=np.empty_like(x)).y for x in xs]
    want_step = [step(**{**mesh, "u": mesh["u"].copy(), "v": mesh["v"].copy()}, dt=np.float32(1e-3),
                      out=[np.empty_like(mesh["u"]), np.empty_like(mesh["v"])]) for mesh in meshes]

    def calls(k: int) -> bool:
        ok = True
        for _ in range(30):
            ok &= prog(xs[k], 0.5, 2.0).y.tobytes() == want_y[k].tobytes()
            got = step(**meshes[k], dt=1e-3)
            ok &= all(a.tobytes() == b.tobytes() for a, b in zip(got, want_step[k]))
        return ok

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(calls, range(4)))
