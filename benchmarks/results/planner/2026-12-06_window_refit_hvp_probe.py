"""Probe (kept for its record): the Neo-Hookean energy's second derivative program over the mesh
(`irfuse.jvp(irfuse.vjp(program, wrt="u"), wrt="u")`, every output), the one derived program whose
plan the cost model's window refit moved (h100 profile: its element kernel from blocks of 512 at two
elements a thread (float32) or 256 (float64) to 64), timed under the tree on PYTHONPATH: medians of
seven timings of 20 calls back to back, PyTorch CUDA tensors, a box of 6 C^3 Morton-ordered tets.
    python PROBE.py CUBES LABEL"""
import statistics
import sys
import time
import warnings

import numpy as np
import torch

import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra

warnings.simplefilter("ignore")
cubes, label = int(sys.argv[1]), sys.argv[2]
X, conn = box_tetrahedra(cubes)
prepared = Connectivity(conn, len(X))
rng = np.random.default_rng(0)
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
for dtype in ("f32", "f64"):
    np_t = np.float32 if dtype == "f32" else np.float64
    p = irfuse.compile("examples/mesh/neo_hookean_energy.kas", backend="cuda", dtype=dtype, profile="h100")
    h = irfuse.jvp(irfuse.vjp(p, wrt="u"), wrt="u")
    values = {"X": X, "conn": None, "u": 1e-3 * rng.standard_normal(X.shape), "dN": DN, "lam": 1.5, "mu": 0.7, "bar_E": 1.0,
              "bar_grad_u": 1e-2 * rng.standard_normal(X.shape), "du": rng.standard_normal(X.shape)}
    args = {k: prepared if k == "conn" else
            (torch.from_numpy(np.asarray(v, np_t)).cuda() if np.ndim(v) else v) for k, v in values.items()}
    args["dN"] = np.asarray(DN, np_t)
    for _ in range(20):
        out = h(**args)
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            out = h(**args)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / 20)
    d = out["dbar_u"] if isinstance(out, dict) else out[-1]
    digest = hash(torch.as_tensor(d).cpu().numpy().tobytes())
    print(f"{label} {dtype} {6 * cubes ** 3} tets: {statistics.median(times) * 1e3:.4f} ms a call "
          f"(min {min(times) * 1e3:.4f}); dbar_u digest {digest & 0xffffffff:08x}", flush=True)
