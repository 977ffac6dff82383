"""The tangent's diagonal and the matrix-free product of the P1 and Neo-Hookean residuals (f32 and
f64, `--cubes` Morton box, the h100 profile's plans), timed as a loop meets them: run from the
project root by `2026-12-06_refit_ab.sh` once with the head's irfuse (PYTHONPATH) and once with the
working tree's, alternating. Prints one line a program: its ms and the SHA-256 of its result."""
import hashlib, os, sys, time, warnings
import numpy as np, torch
warnings.simplefilter("ignore")
import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra

cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 64
tag = sys.argv[2] if len(sys.argv) > 2 else "?"
X, conn = box_tetrahedra(cubes)[:2]
prepared = Connectivity(conn, len(X))
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)


def timed(call, calls=20):
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


def digest(t):
    return hashlib.sha256(t.detach().cpu().numpy().tobytes()).hexdigest()[:12]


for name in ("p1_residual", "neo_hookean_residual"):
    for dtype, td in (("f32", torch.float32), ("f64", torch.float64)):
        prog = irfuse.compile(f"examples/mesh/{name}.kas", backend="cuda", dtype=dtype)
        rng = np.random.default_rng(0)
        u = torch.tensor(1e-3 * rng.standard_normal(X.shape), dtype=td, device="cuda")
        args = (torch.tensor(X, dtype=td, device="cuda"), u, prepared, torch.tensor(DN, dtype=td, device="cuda"), 1.5, 0.7)
        op = irfuse.linear_operator(prog, *args, wrt="u")
        v = torch.tensor(rng.standard_normal(u.numel()), dtype=td, device="cuda")
        res = timed(lambda: prog(*args))
        app = timed(lambda: op.matvec(v))
        dia = timed(lambda: irfuse.diagonal(prog, *args, wrt="u"), 10)
        print(f"{tag} {name} {dtype} cubes {cubes}: residual {res:.4f} ms, apply {app:.4f} ms, diagonal {dia:.4f} ms; "
              f"bits {digest(prog(*args)['r'])} "
              f"{digest(op.matvec(v))} {digest(irfuse.diagonal(prog, *args, wrt='u'))}", flush=True)
        prog.close()
