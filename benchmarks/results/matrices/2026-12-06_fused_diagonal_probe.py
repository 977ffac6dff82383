"""The tangent's diagonal (`irfuse.diagonal`) of the P1 and Neo-Hookean residuals against their
residual, float32 and float64, on a `--cubes` Morton box (the h100 profile's plans), timed as a
loop meets it, with its peak of GPU memory over the residual's inputs: run from the project root
once with the head's irfuse (PYTHONPATH) and once with the working tree's, alternating, by
`2026-12-06_fused_diagonal_ab.sh`. One line a program: the residual's ms, the diagonal's ms, the
peak (MB over what was allocated before the call), the SHA-256 of the diagonal, and its largest
difference from the float64 host reference (the CPU backend's matrix's diagonal, relative to its
largest entry; at `--cubes` 16, where it is made). A third argument names the programs (comma-
separated; both by default). (At 128 cubes these displacements invert elements of the
Neo-Hookean solid: its diagonal holds NaN there, compared as bytes.)"""
import hashlib, sys, time, warnings
import numpy as np, torch
warnings.simplefilter("ignore")
import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra

cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 64
tag = sys.argv[2] if len(sys.argv) > 2 else "?"
X, conn = box_tetrahedra(cubes)[:2]
prepared = Connectivity(conn, len(X))
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)


def timed(call, calls=10):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


for name in sys.argv[3].split(",") if len(sys.argv) > 3 else ("p1_residual", "neo_hookean_residual"):
    for dtype, td in (("f32", torch.float32), ("f64", torch.float64)):
        prog = irfuse.compile(f"examples/mesh/{name}.kas", backend="cuda", dtype=dtype)
        rng = np.random.default_rng(0)
        u = 1e-3 * rng.standard_normal(X.shape)
        args = (torch.tensor(X, dtype=td, device="cuda"), torch.tensor(u, dtype=td, device="cuda"), prepared,
                torch.tensor(DN, dtype=td, device="cuda"), 1.5, 0.7)
        res = timed(lambda: prog(*args), 20)
        d = irfuse.diagonal(prog, *args, wrt="u")
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        d = irfuse.diagonal(prog, *args, wrt="u")
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20
        dia = timed(lambda: irfuse.diagonal(prog, *args, wrt="u"))
        again = irfuse.diagonal(prog, *args, wrt="u")
        same = again.cpu().numpy().tobytes() == d.cpu().numpy().tobytes()  # (NaN-safe: bytes)
        nans = int(torch.isnan(d).sum())
        error = ""
        if cubes <= 16:
            host = irfuse.compile(f"examples/mesh/{name}.kas", backend="cpu", dtype="f64")
            want = irfuse.tangent_matrix(host, X, u, Connectivity(conn, len(X)), DN, 1.5, 0.7, wrt="u").diagonal()
            error = f", from the f64 matrix {np.abs(d.cpu().numpy().reshape(-1) - want).max() / np.abs(want).max():.2e}"
        print(f"{tag} {name} {dtype} cubes {cubes}: residual {res:.4f} ms, diagonal {dia:.4f} ms "
              f"({dia / res:.1f}x), peak {peak:.0f} MB, repeat bit-equal {same}, NaN entries {nans}, "
              f"bits {hashlib.sha256(d.cpu().numpy().tobytes()).hexdigest()[:12]}{error}", flush=True)
        prog.close()
