"""Probe: NumPy idioms of element codes in an @irfuse.program body (CPU backend, float64). Each
body is itself NumPy code for one element, so its NumPy meaning is the function called on one
element's arrays: a case compiles and matches that, element by element (to 1e-13), or is
refused with an IrfuseError naming this file and a line. WRONG, CRASH and REFUSED-UNLOCATED
would be faults; `refused` lists what the front end does not take.

    IRFUSE_CACHE_DIR=$(mktemp -d) python 2026-12-08_python_idioms_probe.py
"""
import traceback

import numpy as np

import irfuse
from irfuse import Matrix, Scalar as S, Tensor, Vector

V3, M3 = Vector[3], Matrix[3, 3]
N = 9
cases = []


def case(f):
    cases.append(f)
    return f


# --- values NumPy makes ---
@case
def eye(F: M3):
    return 0.5 * (F.T @ F - np.eye(3))
@case
def identity(F: M3, p: S):
    return F - p * np.identity(3)
@case
def deviator(A: M3):
    return A - np.trace(A) / 3 * np.eye(3)
@case
def array_of_scalars(a: S, b: S):
    return np.array([a, b, a * b])
@case
def array_literal_matrix(F: M3, a: S):
    C = np.array([[2.0, 0, 0], [0, a, 0], [0, 0, 1.0]])
    return C @ F
@case
def stack_rows(u: V3, w: V3):
    return np.stack([u, w, u + w])
@case
def zeros_then_fill(a: S, b: S):
    v = np.zeros(3)
    v[0] = a
    v[1] = b
    return v
# --- array methods ---
@case
def method_trace(A: M3):
    return A.trace()
@case
def method_sum(A: M3):
    return A.sum()
@case
def method_dot(A: M3, b: V3):
    return A.dot(b).dot(b)
@case
def method_transpose(A: M3):
    return A.transpose() @ A
@case
def method_clip(u: V3, a: S):
    return u.clip(0.25, a)
@case
def method_max(A: M3):
    return A.max()
# --- slices ---
@case
def column(A: M3):
    return A[:, 1]
@case
def row(A: M3):
    return A[0, :]
@case
def leading_vector(u: V3):
    return u[0:2]
@case
def block(A: M3):
    return A[:2, :2]
@case
def reversed_vector(u: V3):
    return u[::-1]
@case
def slice_then_entry(T: Tensor[2, 3, 3]):
    return T[:, 0][1]
@case
def slice_assigned(A: M3, u: V3):
    A[:, 0] = u
    return A
# --- functions of values ---
@case
def square(a: S):
    return np.square(a)
@case
def fabs(a: S):
    return np.fabs(a - 0.5)
@case
def ddot_by_sum(A: M3, B: M3):
    return np.sum(A * B)
@case
def einsum_ddot(A: M3, B: M3):
    return np.einsum("ij,ij->", A, B)
@case
def norm_fro(A: M3):
    return np.linalg.norm(A)
@case
def cross(u: V3, w: V3):
    return np.cross(u, w)
@case
def solve(A: M3, b: V3):
    return np.linalg.solve(A + 3 * np.eye(3), b)
@case
def log1p(a: S):
    return np.log1p(a)
@case
def arctan2(a: S, b: S):
    return np.arctan2(a, b)
@case
def hypot(a: S, b: S):
    return np.hypot(a, b)
@case
def mean(u: V3):
    return np.mean(u)
@case
def diag(A: M3):
    return np.diag(A)
@case
def min_of_three(a: S, b: S):
    return min(a, b, 0.5)
@case
def scalar_over_vector(u: V3, a: S):
    return a / (u + 2.0)
# --- numbers given to variables ---
@case
def accumulator(X: Matrix[4, 3], w: irfuse.Uniform[Vector[4]]):
    E = 0.0
    for q in range(4):
        E += w[q] * X[q, 0]
    return E
@case
def entry_set_to_a_number(u: V3):
    u[1] = 0.0
    return u
# --- control flow ---
@case
def early_return(a: S, b: S):
    if a > 0.5:
        return a * b
    return a - b
@case
def return_mapping(sig: M3, k: S):
    s = sig - np.trace(sig) / 3 * np.eye(3)
    f = np.sqrt(1.5 * np.sum(s * s)) - k
    if f <= 0:
        return sig
    return sig - f / (f + k) * s


def located(e: Exception) -> bool:
    return __file__ in str(e).splitlines()[0]


rng = np.random.default_rng(2)
counts: dict[str, int] = {}
for f in cases:
    name = f.__name__
    try:
        prog = irfuse.compile(f, dtype="f64", backend="cpu")
    except irfuse.IrfuseError as e:
        kind = "refused" if located(e) else "REFUSED-UNLOCATED"
        print(f"{kind:18s} {name}: {str(e).splitlines()[0].split('error: ')[-1][:140]}")
        counts[kind] = counts.get(kind, 0) + 1
        continue
    except Exception as e:  # noqa: BLE001 -- a fault, reported
        print(f"{'CRASH':18s} {name}: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
        counts["CRASH"] = counts.get("CRASH", 0) + 1
        continue
    arrays = {k: rng.random(prog.shapes[k] if k in prog.uniform else (N, *prog.shapes[k])) for k in prog.inputs}
    got = prog(**arrays)
    ok = True
    for e in range(N):
        want = f(*(arrays[k] if k in prog.uniform else arrays[k][e].copy() for k in prog.inputs))
        want = want if isinstance(want, tuple) else (want,)
        for out, w in zip(prog.outputs, want):
            g = np.asarray(got[out]) if out in prog.uniform else np.asarray(got[out])[e]
            ok &= g.shape == np.shape(w) and bool(np.allclose(g, w, rtol=1e-13, atol=1e-13))
    kind = "ok" if ok else "WRONG"
    print(f"{kind:18s} {name}")
    counts[kind] = counts.get(kind, 0) + 1
print(counts, f"({len(cases)} bodies)")
