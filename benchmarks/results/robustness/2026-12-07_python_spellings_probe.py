"""Probe: Python constructs a user might write in an @irfuse.program body (CPU backend,
float64). Each case either compiles and matches NumPy, or is refused with an IrfuseError naming
this file and a line; a case marked with its NumPy meaning and refused is printed as
REFUSED-BUT-EXPECTED-TO-WORK (what the front end does not take), a crash as CRASH.

    IRFUSE_CACHE_DIR=$(mktemp -d) python 2026-12-07_python_spellings_probe.py
"""
import math, sys, traceback
import numpy as np
import irfuse
from irfuse import Scalar as S, Vector as V, Matrix as M, Mask, Uniform

N = 7
rng = np.random.default_rng(1)
FILE = __file__
SCALE = 0.5
K = 3
cases = []
def case(expect=None):
    def deco(f):
        cases.append((f, expect))
        return f
    return deco

# --- arithmetic forms ---
@case(lambda a: a ** 2)
def pow2(a: S): return a ** 2
@case(lambda a: np.abs(a) ** 0.5)
def pow_half(a: S):
    b = a * a
    return b ** 0.25
@case(lambda a: 1.0 / (a + 2.0))
def pow_neg(a: S): return (a + 2.0) ** -1
@case(lambda a: np.abs(a))
def builtin_abs(a: S): return abs(a)
@case(lambda a, b: np.maximum(a, b))
def builtin_max(a: S, b: S): return max(a, b)
@case(lambda a: 2.0 / (a + 3.0))
def number_over(a: S): return 2 / (a + 3.0)
@case(lambda a: a / 2)
def over_int(a: S): return a / 2
@case(lambda a, b: np.floor(a / b))
def floordiv(a: S, b: S): return a // b
@case(lambda a, b: np.fmod(a, b))
def modulo(a: S, b: S): return a % b
@case(lambda a: a)
def unary_plus(a: S): return +a
@case(lambda a: a)
def double_neg(a: S): return -(-a)
@case(lambda a: a * SCALE)
def global_const(a: S): return a * SCALE
@case(lambda a: a * math.pi)
def math_pi(a: S): return a * math.pi
@case(lambda a: a * np.pi)
def np_pi(a: S): return a * np.pi
@case(lambda a: a * K)
def global_int(a: S): return a * K
@case(None)
def complex_lit(a: S): return a * 1j
@case(None)
def bool_lit(a: S): return a * True
@case(None)
def string_lit(a: S): return a * "x"
@case(lambda a: a * np.inf)
def inf_lit(a: S): return a * 1e400
@case(lambda a: np.full_like(a, 6.0))
def const_only(a: S):
    y = 2 * 3
    return y
@case(lambda a: np.full_like(a, 1.0))
def return_number(a: S): return 1.0

# --- control flow ---
@case(lambda a: np.where((0 < a) & (a < 0.5), a, -a))
def chained_cmp(a: S):
    if 0 < a < 0.5:
        y = a
    else:
        y = -a
    return y
@case(lambda a, b: np.where((a > 0.3) & (b > 0.3), a, b))
def and_cond(a: S, b: S):
    if a > 0.3 and b > 0.3:
        y = a
    else:
        y = b
    return y
@case(lambda a, b: np.where((a > 0.3) | (b > 0.3), a, b))
def or_cond(a: S, b: S):
    if a > 0.3 or b > 0.3:
        y = a
    else:
        y = b
    return y
@case(lambda a, b: np.where(~(a > 0.3), a, b))
def not_cond(a: S, b: S):
    if not a > 0.3:
        y = a
    else:
        y = b
    return y
@case(lambda a, b: np.where(a > b, a, b))
def ternary(a: S, b: S): return a if a > b else b
@case(lambda a: a)
def only_if_new_var(a: S):
    if a > 0.5:
        z = a * 2
    return a
@case(None)
def if_defines_used_after(a: S):
    if a > 0.5:
        z = a * 2
    return z
@case(lambda a: np.where(a > 0.5, 2 * a, a))
def if_no_else(a: S):
    y = a
    if a > 0.5:
        y = a * 2
    return y
@case(None)
def cond_on_vector(v: V[3]):
    if v > 0:
        y = v
    else:
        y = -v
    return y
@case(lambda a: a * 8)
def nested_for(a: S):
    y = a
    for _ in range(2):
        for _ in range(4):
            y = y + a
    y = y - a
    return y
@case(lambda a: a)
def range_zero(a: S):
    y = a
    for _ in range(0):
        y = y * 2
    return y
@case(lambda a: a * 8)
def range_start_stop(a: S):
    y = a
    for _ in range(2, 5):
        y = y * 2
    return y
@case(lambda a: a * 4)
def range_step(a: S):
    y = a
    for _ in range(0, 4, 2):
        y = y * 2
    return y
@case(None)
def while_loop(a: S):
    y = a
    while y < 1:
        y = y * 2
    return y
@case(lambda a: a * 2)
def early_return_in_if(a: S):
    if a > 0.5:
        return a * 2
    return a * 2
@case(None)
def no_return(a: S):
    y = a * 2
@case(None)
def empty_body(a: S):
    """Nothing."""

# --- assignment forms ---
@case(lambda a, b: (b, a))
def tuple_swap(a: S, b: S):
    a, b = b, a
    return a, b
@case(lambda a: a * 2)
def shadow_param(a: S):
    a = a * 2
    return a
@case(lambda v: v / 2)
def aug_div(v: V[3]):
    w = v
    w /= 2
    return w
@case(lambda v, u: v - u)
def aug_sub(v: V[3], u: V[3]):
    w = v
    w -= u
    return w
@case(None)
def walrus(a: S):
    return (y := a * 2) + y
@case(lambda a: (a, a))
def return_twice(a: S): return a, a
@case(lambda a: a)
def return_input(a: S): return a
@case(None)
def retype(a: S, v: V[3]):
    a = v * 2.0
    return a
@case(lambda a: a * 2)
def unicode_name(a: S):
    α = a * 2
    return α
@case(None)
def chained_assign(a: S):
    x = y = a * 2
    return x, y
@case(None)
def annotated_wrong_type(a: S):
    y: V[3] = a * 2
    return y

# --- indexing ---
@case(lambda v: v[:, -1])
def neg_index(v: V[3]): return v[-1]
@case(None)
def slice_index(v: V[3]): return v[0:2]
@case(lambda A: A[:, 0, 1])
def tuple_index(A: M[3, 3]): return A[0, 1]
@case(lambda A: A[:, 0, 1])
def double_index(A: M[3, 3]): return A[0][1]
@case(None)
def index_oob(v: V[3]): return v[3]
@case(None)
def index_by_value(v: V[3], a: S): return v[a]
@case(lambda A: np.einsum("nji,njk->nik", A, A))
def transpose_mm(A: M[3, 3]): return A.T @ A
@case(lambda A: A)
def double_t(A: M[3, 3]): return A.T.T
@case(lambda v: np.einsum("ni,ni->n", v, v))
def dot_at(v: V[3]): return v @ v
@case(None)
def attr_shape(v: V[3]): return v.shape
@case(lambda v: v * 2)
def vec_times_int(v: V[3]): return 2 * v
@case(lambda v, a: v + a[:, None])
def vec_plus_scalar(v: V[3], a: S): return v + a
@case(lambda v, u: v * u)
def vec_times_vec(v: V[3], u: V[3]): return v * u

# --- calls ---
@case(lambda A: np.linalg.det(A))
def op_kwargs(A: M[3, 3]): return irfuse.ops.det(A=A)
@case(None)
def print_call(a: S):
    print(a)
    return a
@case(None)
def assert_stmt(a: S):
    assert a > 0
    return a
@case(None)
def lambda_expr(a: S):
    f = lambda x: x * 2
    return f(a)
@case(None)
def listcomp(v: V[3]):
    return [x for x in range(3)]
@case(lambda a: np.sin(a))
def np_call(a: S): return np.sin(a)
@case(lambda a: np.sin(a))
def math_call(a: S): return math.sin(a)
@case(lambda a: np.sum(a) * np.ones_like(a))
def sum_times_ones(a: S):
    s = irfuse.sum(a)
    return a * 0 + s
@case(None)
def global_stmt(a: S):
    global SCALE
    return a
@case(None)
def del_stmt(a: S):
    y = a
    del y
    return a
@case(None)
def star_args(*a): return a
@case(None)
def default_arg(a: S, b: S = 1.0): return a + b
@case(None)
def kwonly(a: S, *, b: S): return a + b
@case(None)
def no_annotation(a): return a
@case(None)
def int_annotation(a: int): return a
def _skip_vector_zero(a: 'x' or V): return a
def _skip_vector_huge(a: 'x' or V): return a
def _skip_matrix_one_dim(a: 'x' or M): return a
@case(None)
async def async_fn(a: S): return a
@case(None)
def generator_fn(a: S):
    yield a
@case(None)
def try_stmt(a: S):
    try:
        y = a
    except Exception:
        y = a
    return y
@case(None)
def with_stmt(a: S):
    with open("x") as f:
        y = a
    return y
@case(None)
def nested_def(a: S):
    def g(x):
        return x
    return g(a)
@case(None)
def fstring(a: S): return f"{a}"
@case(None)
def return_none(a: S): return None
@case(None)
def return_tuple_nested(a: S): return (a, (a, a))
@case(lambda a, b: (a > b).astype(np.float64))
def compare_value_return(a: S, b: S): return a > b
@case(None)
def mask_arith(a: S, b: S):
    m = a > b
    return m + 1
@case(lambda a, b: np.where(a > b, a, 0.0))
def where_number(a: S, b: S): return irfuse.where(a > b, a, 0.0)
@case(None)
def where_mismatch(a: S, v: V[3]): return irfuse.where(a > 0, a, v)
@case(lambda a: np.where((a > 0.2) != (a > 0.7), a, -a))
def mask_neq(a: S):
    m1 = a > 0.2
    m2 = a > 0.7
    return irfuse.where(m1 != m2, a, -a)
@case(None)
def is_compare(a: S, b: S):
    if a is b:
        y = a
    else:
        y = b
    return y
@case(None)
def in_compare(a: S):
    if a in (1, 2):
        y = a
    else:
        y = -a
    return y

def classify(exc):
    text = str(exc)
    located = (FILE in text or "pyfront.py" in text) and any(ch.isdigit() for ch in text)
    return located, text.splitlines()[0][:230] if text else repr(exc)

def inputs_for(f):
    import inspect
    args = []
    for p in inspect.signature(f).parameters.values():
        ann = p.annotation
        shape = getattr(ann, "shape", None)
        args.append(p.name)
    return args

counts = {}
for f, expect in cases:
    name = f.__name__
    try:
        prog = irfuse.compile(f, dtype="f64", backend="cpu")
    except irfuse.IrfuseError as e:
        located, first = classify(e)
        kind = "refused" if located else "REFUSED-UNLOCATED"
        if expect is not None:
            kind = "REFUSED-BUT-EXPECTED-TO-WORK" if located else kind
        print(f"{kind:28s} {name}: {first}")
        counts[kind] = counts.get(kind, 0) + 1
        continue
    except Exception as e:
        print(f"{'CRASH':28s} {name}: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
        counts["CRASH"] = counts.get("CRASH", 0) + 1
        continue
    try:
        arrs = {}
        for k in prog.inputs:
            shp = prog.shapes[k]
            arrs[k] = rng.random((N, *shp)) if k not in getattr(prog, "uniform", ()) else rng.random(shp)
        out = prog(**arrs)
        got = [np.asarray(o) for o in out]
        if expect is None:
            print(f"{'ACCEPTED-UNEXPECTED':28s} {name}: outputs {prog.outputs} shapes {[g.shape for g in got]}")
            counts["ACCEPTED"] = counts.get("ACCEPTED", 0) + 1
            continue
        ref = expect(*[arrs[k] for k in prog.inputs]) if prog.inputs else expect()
        ref = ref if isinstance(ref, tuple) else (ref,)
        ok = len(ref) == len(got) and all(np.allclose(np.broadcast_to(r, g.shape) if np.ndim(r) < g.ndim else r, g, rtol=1e-12, atol=1e-12, equal_nan=True) for r, g in zip(ref, got))
        kind = "ok" if ok else "WRONG"
        print(f"{kind:28s} {name}" + ("" if ok else f": got {got[0].ravel()[:4]} want {np.ravel(ref[0])[:4]}"))
        counts[kind] = counts.get(kind, 0) + 1
    except irfuse.IrfuseError as e:
        print(f"{'CALL-REFUSED':28s} {name}: {str(e).splitlines()[0][:200]}")
        counts["CALL-REFUSED"] = counts.get("CALL-REFUSED", 0) + 1
    except Exception as e:
        print(f"{'CALL-CRASH':28s} {name}: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
        counts["CALL-CRASH"] = counts.get("CALL-CRASH", 0) + 1
print(counts)
