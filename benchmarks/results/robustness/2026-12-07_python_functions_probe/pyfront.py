import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import compile_each  # noqa: E402

src = r'''from __future__ import annotations
import irfuse, math
import numpy as np
from irfuse import Matrix, Vector, Scalar, Mask, Uniform, Nodal, Index
from irfuse.ops import venorm3, mmul33
G = 3.0
def f_global(x: Vector[3]):
    return x * G
def f_while(x: Vector[3]):
    while True:
        x = x + x
    return x
def f_try(x: Vector[3]):
    try:
        y = x + x
    except Exception:
        y = x
    return y
def f_walrus(x: Vector[3]):
    return (y := x + x)
def f_lambda(x: Vector[3]):
    g = lambda z: z + z
    return g(x)
def f_comp(x: Vector[3]):
    return [x for _ in range(3)]
def f_star(*x):
    return x
def f_default(x: Vector[3], s: Scalar = 1.0):
    return x * s
def f_kwonly(x: Vector[3], *, s: Scalar):
    return x * s
def f_nested(x: Vector[3]):
    def inner(z):
        return z + z
    return inner(x)
async def f_async(x: Vector[3]):
    return x
def f_gen(x: Vector[3]):
    yield x
def f_math(x: Scalar):
    return math.sin(x)
def f_np(x: Scalar):
    return np.sin(x)
def f_attr(x: Vector[3]):
    return x.T
def f_sub(x: Vector[3]):
    return x[0]
def f_sub5(x: Vector[3]):
    return x[5]
def f_slice(x: Vector[3]):
    return x[0:2]
def f_str(x: Vector[3]):
    return "x"
def f_none(x: Vector[3]):
    return None
def f_noreturn(x: Vector[3]):
    y = x + x
def f_two_returns(x: Vector[3]):
    if x[0] > 0.0:
        return x
    return x + x
def f_bad_annot(x: int):
    return x
def f_noannot(x):
    return x
def f_matrix_bad(x: Matrix[3]):
    return x
def f_matrix_zero(x: Matrix[0, 3]):
    return x
def f_matrix_neg(x: Matrix[-1, 3]):
    return x
def f_matrix_huge(x: Matrix[100000, 100000]):
    return x
def f_vector_float(x: Vector[2.5]):
    return x
def f_range_huge(x: Vector[3]):
    for _ in range(10**12):
        x = x + x
    return x
def f_range_neg(x: Vector[3]):
    for _ in range(-3):
        x = x + x
    return x
def f_range_var(x: Vector[3], n: Scalar):
    for _ in range(n):
        x = x + x
    return x
def f_div_vec(x: Vector[3]):
    return x / x
def f_pow(x: Scalar):
    return x ** 2
def f_mod(x: Scalar):
    return x % 2.0
def f_floordiv(x: Scalar):
    return x // 2.0
def f_bool_num(x: Scalar):
    return x and 1.0
def f_chain_cmp(x: Scalar):
    return 0.0 < x < 1.0
def f_ternary(x: Scalar):
    return x if x > 0.0 else -x
def f_huge_lit(x: Scalar):
    return x * 1e400
def f_nan_lit(x: Scalar):
    return x * float("nan")
def f_int_lit(x: Scalar):
    return x * 10**400
def f_complex(x: Scalar):
    return x * 1j
def f_unknown_op(x: Scalar):
    return irfuse.ops.no_such_op(x)
def f_op_wrong_arity(x: Vector[3]):
    return venorm3(x, x)
def f_op_kwargs(x: Vector[3]):
    return venorm3(x=x)
def f_shadow_param(x: Vector[3], x2: Vector[3]):
    x = venorm3(x)
    return x
def f_unused(x: Vector[3], y: Vector[3]):
    return x
def f_return_input(x: Vector[3]):
    return x
def f_empty(x: Vector[3]):
    pass
def f_global_stmt(x: Vector[3]):
    global G
    return x
def f_del(x: Vector[3]):
    y = x
    del y
    return x
def f_assert(x: Vector[3]):
    assert x
    return x
def f_tuple_assign(x: Vector[3]):
    a, b = x, x
    return a + b
def f_aug_undefined(x: Vector[3]):
    y += x
    return y
def f_undefined(x: Vector[3]):
    return z
def f_self_ref(x: Vector[3]):
    y = y + x
    return y
def f_import(x: Vector[3]):
    import os
    return x
def f_print(x: Vector[3]):
    print(x)
    return x
def f_dunder(x: Vector[3]):
    return x.__add__(x)
def f_if_no_else_def(x: Vector[3]):
    if x[0] > 0.0:
        y = x
    return y
def f_for_else(x: Vector[3]):
    for _ in range(2):
        x = x + x
    else:
        x = x
    return x
def f_break(x: Vector[3]):
    for _ in range(2):
        break
    return x
def f_loopvar_use(x: Vector[3]):
    for i in range(3):
        x = x * i
    return x
def f_with(x: Vector[3]):
    with open("f") as g:
        pass
    return x
def f_match(x: Scalar):
    match x:
        case _:
            return x
def f_return_dict(x: Vector[3]):
    return {"a": x}
def f_return_nested(x: Vector[3]):
    return (x, (x, x))
def f_mask_arith(m: Mask):
    return m + m
def f_uniform_bad(x: Uniform[int]):
    return x
def f_uniform_vec(x: Vector[3], u: Uniform[Vector[3]]):
    return x + u
def f_reduce_in_loop(x: Scalar):
    for _ in range(2):
        x = x + irfuse.sum(x)
    return x
def f_max_of_vec(x: Vector[3]):
    return irfuse.max(x)
def f_sum_two(x: Scalar):
    return irfuse.sum(x, x)
'''
compile_each(src, 'f_', 'pyprogs')
