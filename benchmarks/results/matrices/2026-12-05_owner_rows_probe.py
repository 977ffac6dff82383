"""Probe (kept for its record, 2026-12-05_owner_rows_probe_*.txt): the tangent's owner-computes
assembly by the rounds kernel (D threads a node, each slot's rows staged) against a thread a node
adding its slots' rows into its own (`rows_emit.OWNER_ROWS`), in one process, alternating twice:
`irfuse.tangent_matrix(..., out=M)` of the P1 and Neo-Hookean tangents, float32, PyTorch CUDA
tensors, on the Morton box of `tangents.py`: medians of seven timings of 20 calls, the kernel's
registers (NVRTC's report) and the values' SHA-256. SWITCH names the `rows_emit` flag turned on
against the rounds kernel: `OWNER_ROWS` (2026-12-05_owner_rows.patch, the default) or
`ROW_OWNER` (2026-12-05_row_owner.patch: D threads a node, each owning a row).

    python PROBE.py CUBES [SWITCH]      (from the repository's root, on a GPU)"""
import hashlib, os, sys, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import torch
import irfuse
import irfuse.api.tangents as tangents
import irfuse.backend.rows_emit as rows_emit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, back_to_back_ms, mesh, rows_kernel_reports  # noqa: E402

cubes = int(sys.argv[1])
switch = sys.argv[2] if len(sys.argv) > 2 else "OWNER_ROWS"
if not hasattr(rows_emit, switch):  # (set on a package without it, the flag would switch nothing)
    sys.exit(f"{switch}: irfuse.backend.rows_emit has no such flag (is the patch's tree on PYTHONPATH?)")
seen = rows_kernel_reports()  # ("rows": NVRTC's report of the rows kernel compiled last)
t, prepared, conn = mesh(torch, cubes)
print(f"{len(conn):,} tets", flush=True)
for run in (1, 2):
    for owner in (False, True):
        setattr(rows_emit, switch, owner)
        for name in ("p1_residual", "neo_hookean_residual"):
            seen.clear()
            tangents._JACOBIANS.clear()  # (the kernel made again, as the switch says)
            prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", f"{name}.kas"), backend="cuda")
            args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
            M = irfuse.tangent_matrix(prog, *args, wrt="u")
            first = M.values().cpu().numpy().tobytes()
            times = back_to_back_ms(lambda M=M, prog=prog, args=args:
                                    irfuse.tangent_matrix(prog, *args, wrt="u", out=M))
            again = M.values().cpu().numpy().tobytes()
            r = seen.get("rows")
            print(f"run {run} {switch if owner else 'rounds'} {name:22s} {np.median(times):.4f} ms "
                  f"({min(times):.4f}-{max(times):.4f}); registers {r.registers if r else '(cached)'}; "
                  f"same bits again: {first == again}; sha256 {hashlib.sha256(again).hexdigest()[:16]}", flush=True)
            del M
