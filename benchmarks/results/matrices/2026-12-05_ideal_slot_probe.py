"""The instructions of a slot of the P1 elasticity tangent in closed form, as lean as we wrote it
(`2026-12-05_ideal_slot.cu`, by hand), counted in its sm_90 machine code, and the time they
take at the GPU's peak issue rate for the 12.6 M-tet box's 50,331,648 slots. No GPU: NVRTC here
and nvdisasm (`pip install nvidia-cuda-nvdisasm`).

    python3 benchmarks/results/matrices/2026-12-05_ideal_slot_probe.py [NVDISASM]

The slot's body is what lies between the kernel's two barriers (the shared rows zeroed before,
written out after), run once a slot.
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("parts", os.path.join(HERE, "2026-12-05_rows_kernel_parts_probe.py"))
parts = importlib.util.module_from_spec(_spec)  # (its compile, disassembly and counts: one copy of them)
_spec.loader.exec_module(parts)
SLOTS = 50_331_648  # (4 a tet of benchmarks/tangents.py's 128-cube box)
SMS, SCHEDULERS = 132, 4  # (H100 SXM and H200: a warp instruction a scheduler a clock)


def check_formulas() -> None:
    """The kernel's arithmetic written again in NumPy for one random tet: its gradients are the
    P1 basis's and its 12 x 12 block rows the Hessian of the element's linear elastic energy
    (central differences), so the count is that of the right computation."""
    import numpy as np

    x = np.random.default_rng(1).standard_normal((4, 3))
    if np.linalg.det(np.stack([x[c + 1] - x[0] for c in range(3)], axis=1)) < 0:
        x[[1, 2]] = x[[2, 1]]  # (positively oriented, as the mesh's tets: the volume is det / 6)
    J = np.stack([x[c + 1] - x[0] for c in range(3)], axis=1)
    C = np.array([[J[(i + 1) % 3, (c + 1) % 3] * J[(i + 2) % 3, (c + 2) % 3]
                   - J[(i + 1) % 3, (c + 2) % 3] * J[(i + 2) % 3, (c + 1) % 3] for c in range(3)] for i in range(3)])
    det = J[0] @ C[0]
    g = np.vstack([np.zeros(3), C.T / det])
    g[0] = -(g[1] + g[2] + g[3])
    lam, mu, V = 1.3, 0.7, det / 6
    K = np.array([[V * (lam * g[a, i] * g[b, j] + mu * g[a, j] * g[b, i] + (mu * g[a] @ g[b] if i == j else 0))
                   for b in range(4) for j in range(3)] for a in range(4) for i in range(3)])

    reference = np.array([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    grad = np.linalg.solve(J.T, reference.T).T  # (the basis's gradients found independently)
    volume = abs(np.linalg.det(J)) / 6

    def energy(u):
        e = (u.reshape(4, 3).T @ grad + (u.reshape(4, 3).T @ grad).T) / 2
        return volume * (lam / 2 * np.trace(e) ** 2 + mu * np.sum(e * e))
    h, eye = 1e-4, np.eye(12)
    H = np.array([[(energy(h * (eye[p] + eye[q])) - energy(h * (eye[p] - eye[q])) - energy(h * (eye[q] - eye[p]))
                    + energy(-h * (eye[p] + eye[q]))) / (4 * h * h) for q in range(12)] for p in range(12)])
    if not np.allclose(K, H, rtol=1e-5, atol=1e-7 * abs(H).max()):
        sys.exit("the kernel's formulas are not the element's tangent")


check_formulas()
found, _, registers = parts.machine_code(open(os.path.join(HERE, "2026-12-05_ideal_slot.cu")).read(), "ideal_slot")
body = parts.kinds(found, *parts.slot_body(found))["all"]
warp_instructions = body * SLOTS / 32
print(f"registers {registers}; a slot's body {body} instructions; "
      f"{warp_instructions / 1e6:.0f} M warp instructions for {SLOTS:,} slots")
for clock in (1.755e9, 1.98e9):
    ms = warp_instructions / (SMS * SCHEDULERS * clock) * 1e3
    print(f"  at the peak issue rate, {clock / 1e9:.3f} GHz: {ms:.3f} ms")
