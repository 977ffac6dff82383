"""Probe (kept for its record, 2026-12-05_rows_occupancy_probe_*.txt): how the rounds kernel's time
follows its resident blocks an SM. Its static shared memory (36,624 bytes for the P1 tangent,
float32, 32 nodes a block) lets 6 blocks (18 warps) reside on an sm_90 SM, its 74 registers 8.
A shared array the kernel never touches at run time (`irf_pad`, kept by a store behind `n < 0`)
takes that down to 5 and 4 blocks, the instructions the same: `irfuse.tangent_matrix(..., out=M)`
of the P1 tangent on the Morton box of `tangents.py`, PyTorch CUDA tensors, medians of seven
timings of 20 calls, alternating twice, the values' SHA-256 each time.

    python PROBE.py CUBES      (from the repository's root, on a GPU)"""
import hashlib, os, sys, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import torch
import irfuse
import irfuse.api.tangents as tangents
import irfuse.backend.rows_emit as rows_emit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, back_to_back_ms, mesh  # noqa: E402

real = rows_emit._rounds_kernel
PADS = {6: 0, 5: 2048, 4: 9216}  # blocks an SM (228 KB, 1 KB kept a block) -> bytes added


def padded(pad):
    def kernel(*args, **kw):
        lines = real(*args, **kw)
        if not pad:
            return lines
        return [lines[0], lines[1], f"  __shared__ volatile char irf_pad[{pad}];",
                "  if (n < 0) irf_pad[threadIdx.x] = 1;", *lines[2:]]
    return kernel


t, prepared, conn = mesh(torch, int(sys.argv[1]))
print(f"{len(conn):,} tets", flush=True)
for run in (1, 2):
    for blocks, pad in PADS.items():
        rows_emit._rounds_kernel = padded(pad)
        tangents._JACOBIANS.clear()
        prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
        args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
        M = irfuse.tangent_matrix(prog, *args, wrt="u")
        times = back_to_back_ms(lambda M=M, args=args, prog=prog: irfuse.tangent_matrix(prog, *args, wrt="u", out=M))
        sha = hashlib.sha256(M.values().cpu().numpy().tobytes()).hexdigest()[:16]
        print(f"run {run} pad {pad:5d} B ({blocks} blocks an SM): {np.median(times):.4f} ms "
              f"({min(times):.4f}-{max(times):.4f}); sha256 {sha}", flush=True)
        del M
