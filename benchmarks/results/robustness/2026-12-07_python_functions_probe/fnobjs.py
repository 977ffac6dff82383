from __future__ import annotations
import os, sys, tempfile
HERE = tempfile.mkdtemp()  # (the functions' module is written here and imported)
import functools, irfuse, numpy as np
from irfuse import Vector, Scalar

def deco(f):
    @functools.wraps(f)
    def w(*a, **k):
        return f(*a, **k)
    return w

class K:
    def method(self, x: Vector[3]):
        y = x + x
        return y
    @staticmethod
    def static(x: Vector[3]):
        y = x + x
        return y
    def __call__(self, x: Vector[3]):
        return x + x

def outer():
    scale = 2.0
    def inner(x: Vector[3]):
        y = x * scale
        return y
    return inner

def outer2():
    def inner(x: Vector[3]):
        y = x + x
        return y
    return inner

@deco
def wrapped(x: Vector[3]):
    y = x + x
    return y

def plain(x: Vector[3], s: Scalar):
    y = x * s
    return y

lam = lambda x: x
cases = {
 "bound method": K().method, "staticmethod": K.static, "callable obj": K(), "closure var": outer(), "nested": outer2(),
 "wraps-decorated": wrapped, "partial": functools.partial(plain, s=1.0), "lambda": lam, "builtin": len,
 "numpy ufunc": np.sin, "class": K, "exec-defined": None, "string not source": "def f(x): return x",
 "int": 3, "None": None,
}
ns = {}
exec("from irfuse import Vector\ndef f(x: Vector[3]):\n    y = x + x\n    return y\n", ns)
cases["exec-defined"] = ns["f"]
for name, f in cases.items():
    try:
        p = irfuse.compile(f, backend="cpu", dtype="f64")
        print(f"{name:18s} COMPILED {p.inputs} {p.outputs}", p(np.ones((2, 3)))[0][0] if p.inputs == ('x',) else "")
    except Exception as e:
        print(f"{name:18s} {type(e).__module__}.{type(e).__name__}: {str(e).splitlines()[0][:220]}")
