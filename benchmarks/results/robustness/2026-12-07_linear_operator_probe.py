# The derivative as an operator of random mesh programs (irfuse.testing.derivatives' programs,
# the CPU backend, float64): A v against the tangent matrix's M v, A^T w against M^T w, with and
# without Dirichlet components. Usage: python 2026-12-07_linear_operator_probe.py FIRST_SEED END_SEED
import sys, numpy as np, traceback
import irfuse
from irfuse.testing.derivatives import random_differentiable_programs, float64_inputs, program_of, frontend, Source, program_indices
from irfuse.api.tangents import tangent_matrix
from irfuse.diagnostics import CompileError, UsageError
bad = 0; compared = 0
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    for kind in ("mesh_tangents", "mesh"):
        if kind == "mesh" and seed % 4: continue
        src = random_differentiable_programs(kind, seed)
        program = program_of(frontend(Source(src, "<p>")).module)
        if not program_indices(program): continue
        inputs, nodes = float64_inputs(program, 12, seed)
        prog = irfuse.compile(src, backend="cpu", dtype="f64")
        rng = np.random.default_rng(seed)
        for x in [k for k in prog.inputs if k in prog.nodal]:
            for y in [k for k in prog.outputs if k in prog.nodal]:
                try:
                    M = tangent_matrix(prog, **inputs, wrt=x, of=y)
                except (CompileError, UsageError):
                    continue
                for fixed in (None, rng.random(np.shape(inputs[x])) < 0.3):
                    try:
                        A = irfuse.linear_operator(prog, *[inputs[k] for k in prog.inputs], wrt=x, of=y, fixed=fixed)
                    except (CompileError, UsageError) as e:
                        print(seed, kind, x, y, "op refused:", str(e)[:150]); continue
                    if fixed is not None:
                        Mf = tangent_matrix(prog, **inputs, wrt=x, of=y, fixed=fixed)
                    else:
                        Mf = M
                    v = rng.uniform(-1, 1, A.shape[1]); w = rng.uniform(-1, 1, A.shape[0])
                    got = A.matvec(v); want = Mf @ v
                    scale = max(np.nanmax(np.abs(want), initial=0), 1e-300)
                    e1 = np.nanmax(np.abs(got - want), initial=0) / scale
                    gotT = A.rmatvec(w); wantT = Mf.T @ w
                    scaleT = max(np.nanmax(np.abs(wantT), initial=0), 1e-300)
                    e2 = np.nanmax(np.abs(gotT - wantT), initial=0) / scaleT
                    nan_mismatch = np.any(np.isnan(got) != np.isnan(want)) or np.any(np.isnan(gotT) != np.isnan(wantT))
                    compared += 1
                    if e1 > 1e-9 or e2 > 1e-9 or nan_mismatch:
                        bad += 1
                        print("MISMATCH", seed, kind, x, y, fixed is not None, e1, e2, nan_mismatch)
print("compared", compared, "bad", bad)
