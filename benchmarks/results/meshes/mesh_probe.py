"""What the mesh probes of 2026-12-03 share (`..._row_pairs_probe.py`, `..._padded_rows_probe.py`,
`..._member_places_ab.py`, `..._member_loop_bound_probe.py`): a Morton-ordered box of tetrahedra
with the P1 residual's inputs as PyTorch tensors on the GPU, a call's time back to back, and the
three mesh examples timed with their outputs' digest. Imported by those probes from this folder;
it sets nothing up on import."""
import hashlib
import os

import numpy as np
import torch

from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder


def morton_box(cubes: int):
    """(X, u, the prepared connectivity, dN) of a box of `cubes`^3 cubes cut into tets, Morton
    ordered, float32 on the GPU; u small and random (seed 0)."""
    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    dN = torch.tensor([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float32).cuda()
    Xt = torch.from_numpy(X.astype(np.float32)).cuda()
    ut = torch.from_numpy((0.05 / cubes * np.random.default_rng(0).standard_normal(X.shape)).astype(np.float32)).cuda()
    return Xt, ut, Connectivity(torch.from_numpy(conn).cuda(), len(X)), dN


def median_ms(call) -> tuple[float, float]:
    """(median, min) ms a call: five calls to warm up, then seven timings (CUDA events) of 20
    calls back to back."""
    for _ in range(5):
        call()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 20)
    return float(np.median(times)), min(times)


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "mesh")


def mesh_examples(box):
    """For each mesh example whose element kernel sums its rows in groups (the P1 residual, the
    Neo-Hookean residual written by hand, the Neo-Hookean energy with its derived gradient),
    compiled for the GPU and called on `box` (`morton_box`'s four): (name, median ms, min ms, the
    SHA-256 of its outputs' bytes, first 16 digits)."""
    import irfuse

    Xt, ut, prepared, dN = box
    for name in ("p1_residual", "neo_hookean_residual", "neo_hookean_energy"):
        prog = irfuse.compile(os.path.join(EXAMPLES, f"{name}.kas"), backend="cuda")
        call = lambda: prog(Xt, ut, prepared, dN, np.float32(1.0), np.float32(0.5))  # noqa: E731
        out = call()
        outs = out if isinstance(out, (tuple, list)) else (out,)
        digest = hashlib.sha256(b"".join(o.detach().cpu().numpy().tobytes() for o in outs)).hexdigest()[:16]
        yield (name, *median_ms(call), digest)
