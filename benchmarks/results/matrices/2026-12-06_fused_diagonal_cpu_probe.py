"""The tangent's diagonal on the CPU backend (float64, a 24-cube Morton box, 82,944 tets) against the
residual: its first call (compiled) and the median of five more; the head by PYTHONPATH against the
tree, alternating (`python3 <this> head|fused`, each tree with a program cache of its own)."""
import sys, time, warnings, hashlib
warnings.simplefilter("ignore")
import numpy as np, irfuse
from irfuse.mesh import Connectivity, box_tetrahedra
tag = sys.argv[1]
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
X, conn = box_tetrahedra(24)[:2]
c = Connectivity(conn, len(X))
for name in ("p1_residual", "neo_hookean_residual"):
    prog = irfuse.compile(f"examples/mesh/{name}.kas", backend="cpu", dtype="f64")
    u = 1e-3 * np.random.default_rng(0).standard_normal(X.shape)
    t = time.perf_counter(); d = irfuse.diagonal(prog, X, u, c, DN, 1.5, 0.7, wrt="u"); first = time.perf_counter() - t
    ts = []
    for _ in range(5):
        t = time.perf_counter(); d = irfuse.diagonal(prog, X, u, c, DN, 1.5, 0.7, wrt="u"); ts.append(time.perf_counter() - t)
    t = time.perf_counter(); [prog(X, u, c, DN, 1.5, 0.7) for _ in range(5)]; res = (time.perf_counter() - t) / 5
    print(f"{tag} {name} f64 cpu, {len(conn)} tets: residual {res*1e3:.1f} ms, diagonal first call {first:.2f} s, then {np.median(ts)*1e3:.1f} ms; bits {hashlib.sha256(d.tobytes()).hexdigest()[:12]}", flush=True)
