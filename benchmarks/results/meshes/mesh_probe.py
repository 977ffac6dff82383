"""What the mesh probes of 2026-12-03 (late night) share (`..._row_pairs_probe.py`,
`..._padded_rows_probe.py`): a Morton-ordered box of tetrahedra with the P1 residual's inputs
as PyTorch tensors on the GPU, and a call's time back to back. Imported by those probes from this
folder; it sets nothing up on import."""
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
