import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import compile_each  # noqa: E402

src = r'''from __future__ import annotations
import irfuse
from irfuse import Matrix, Vector, Scalar, Mask, Uniform
from irfuse.ops import venorm3
N = 10**12
K = 3
def g_str(x: Vector[3]):
    return "x"
def g_str2(x: Vector[3]):
    y = "x"
    return y
def g_fstr(x: Vector[3]):
    return f"{x}"
def g_bytes(x: Vector[3]):
    return b"x"
def g_range_big(x: Vector[3]):
    for _ in range(1000000000000):
        x = x + x
    return x
def g_range_name(x: Vector[3]):
    for _ in range(N):
        x = x + x
    return x
def g_range_zero(x: Vector[3]):
    for _ in range(0):
        x = x + x
    return x
def g_range_two_args(x: Vector[3]):
    for _ in range(1, 3):
        x = x + x
    return x
def g_range_k(x: Vector[3]):
    for _ in range(K):
        x = x + x
    return x
def g_bool_lit(x: Scalar):
    return x * True
def g_none_mul(x: Scalar):
    return x * None
def g_match(x: Scalar):
    match x:
        case _:
            pass
    return x
def g_neg_lit(x: Scalar):
    return x * -1e400
def g_hex_lit(x: Scalar):
    return x * 0x10
def g_big_int(x: Scalar):
    return x * 123456789012345678901234567890
def g_tiny(x: Scalar):
    return x * 1e-400
def g_return_lit(x: Scalar):
    return 1.0
def g_return_lit_only():
    return 1.0
def g_ellipsis(x: Scalar):
    return ...
def g_starred_ret(x: Vector[3]):
    return *x,
def g_sub_neg(x: Vector[3]):
    return x[-1]
def g_sub_bool(x: Vector[3]):
    return x[True]
def g_sub_float(x: Vector[3]):
    return x[1.0]
def g_sub_name(x: Vector[3]):
    return x[K]
def g_aug_matmul(A: Matrix[3, 3]):
    A @= A
    return A
def g_aug_pow(x: Scalar):
    x **= 2
    return x
def g_annassign(x: Scalar):
    y: Scalar = x + x
    return y
def g_param_dup_output(x: Scalar):
    return x, x
def g_docstring(x: Scalar):
    """doc"""
    return x
def g_cmp_in(x: Scalar):
    return x in x
def g_is(x: Scalar):
    return x is x
def g_not_scalar(x: Scalar):
    return not x
'''
compile_each(src, 'g_', 'pyprogs2')
