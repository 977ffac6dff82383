import os, sys, tempfile
HERE = tempfile.mkdtemp()  # (the functions' module is written here and imported)
import irfuse, numpy as np, sys
from irfuse.driver.compile import compile_text
names = ["int", "float", "double", "threadIdx", "blockIdx", "__global__", "main", "n", "i", "idx", "tid", "N", "out", "_t1", "irf_x", "x0", "restrict", "__restrict__", "const", "unsigned", "long", "sizeof", "template", "class", "new", "delete", "this", "auto", "register", "volatile", "goto", "switch", "case", "default", "static", "extern", "inline", "union", "struct", "typedef", "enum", "signed", "short", "char", "void", "bool", "true", "false", "nullptr", "operator", "namespace", "using", "asm", "__syncthreads", "atomicAdd", "sqrt", "fabs", "exp", "fma", "min", "max", "INFINITY", "NAN", "M_PI", "printf", "std", "blockDim", "gridDim", "warpSize", "e", "E", "f", "s", "a_b", "x" * 300, "elem", "base", "stride", "k", "j", "p", "q", "r", "v", "w", "u", "acc", "sum", "lane", "warp", "smem", "shared", "__shared__", "cta", "g", "h", "inputs", "outputs", "arrays", "stream", "ptr", "data", "_", "__", "__x", "A__B", "uint32_t", "int64_t", "size_t", "float3", "double2", "make_float3", "__ldg", "min_", "irf_t0", "t0", "k0", "kernel", "extern_C", "loop", "gather", "scatter", "uniform", "input", "return", "mask"]
bad = []
for nm in names:
    k = f"matrix3x3 {nm}, B; scalar c; input {nm}; B = mmul33({nm}, {nm}); c = det(B); return B, c;"
    try:
        p = irfuse.compile(k, backend="cpu", dtype="f64")
        A = np.random.default_rng(0).random((5, 3, 3))
        o = p(A)
        ok = np.allclose(o[0], A @ A) and np.allclose(o[1], np.linalg.det(A @ A))
        if not ok: bad.append((nm, "WRONG"))
        compile_text(k, "names.kas", dtype="f64", compile_gpu=True, arch="sm_90")
    except Exception as e:
        msg = str(e).splitlines()[0][:150]
        bad.append((nm[:20], type(e).__name__ + ": " + msg))
for b in bad: print(b)
print("done", len(names))
