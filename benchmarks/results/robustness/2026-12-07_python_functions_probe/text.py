import os, sys, tempfile
HERE = tempfile.mkdtemp()  # (the functions' module is written here and imported)
import importlib.util, irfuse
src = '''from __future__ import annotations
import irfuse
from irfuse import Vector, Scalar, Matrix
from irfuse.ops import vadd3, venorm3
def t1(x: Vector[3]):
    return x + "x"
def t2(x: Vector[3]):
    return vadd3(x, "x")
def t3(x: Vector[3]):
    y = vadd3(x, x)
    return "y"
def t4(x: Vector[3]):
    return venorm3("x")
def t5(x: Scalar):
    return x < "x"
def t6(x: Vector[3]):
    if "x" < x[0]:
        y = x
    else:
        y = x + x
    return y
def t7(x: Vector[3]):
    return -"x"
def t8(x: Vector[3]):
    return irfuse.sum("x")
def t9(x: Vector[3]):
    return "x"[0]
def t10(x: Vector[3]):
    return x * "1.0"
'''
open(os.path.join(HERE, "textp.py"),"w").write(src)
spec = importlib.util.spec_from_file_location("textp", os.path.join(HERE, "textp.py"))
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
for n in ["t1","t2","t3","t4","t5","t6","t7","t8","t9","t10"]:
    try:
        p = irfuse.compile(getattr(m,n), backend="cpu", dtype="f64"); print(n, "COMPILED", p.inputs, p.outputs)
    except Exception as e:
        print(n, type(e).__name__, str(e).splitlines()[0][:200])
for k in ['vector3 x, y; input x; y = vadd3(x, "x"); return y;', 'vector3 x; input x; return "x";',
          'vector3 x, y; input x; y = vadd3(x, x); return y, "x";', 'vector3 x; scalar s; input x; s = venorm3("x"); return s;']:
    try:
        p = irfuse.compile(k, backend="cpu", dtype="f64"); print(repr(k), "COMPILED", p.inputs, p.outputs)
    except Exception as e:
        print(repr(k), type(e).__name__, str(e).splitlines()[0][:200])
