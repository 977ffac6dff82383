"""Comparing a backend's outputs with the float64 NumPy reference.

Per output: the relative error norm ||out - ref|| / ||ref|| over the finite
reference entries, the largest absolute error, and the first element whose
error exceeds the tolerance (with its index), as the seeds' harness reported.
NaN and infinities must appear exactly where the reference has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irfuse.dialects.element_types import element_type


@dataclass
class OutputCheck:
    name: str
    rel_error: float
    max_abs_error: float
    first_bad: tuple[int, ...] | None
    got: float | None
    want: float | None
    ok: bool

    def describe(self) -> str:
        if self.ok:
            return f"{self.name}: ok (relative error {self.rel_error:.2e})"
        where = ""
        if self.first_bad is not None:
            where = f"; first difference at element {self.first_bad[0]}"
            if len(self.first_bad) > 1:
                where += f" entry {list(self.first_bad[1:])}"
            where += f": got {self.got!r}, expected {self.want!r}"
        return f"{self.name}: MISMATCH (relative error {self.rel_error:.2e}, max abs error {self.max_abs_error:.2e}{where})"


def check_output(name: str, got: np.ndarray, want: np.ndarray, dtype: str) -> OutputCheck:
    tol = element_type(dtype).tolerance  # far above rounding, far below any indexing bug
    got64 = got.astype(np.float64)
    if got.shape != want.shape:
        return OutputCheck(name, float("inf"), float("inf"), None, None, None, False)
    finite = np.isfinite(want)
    same_special = np.where(finite, np.isfinite(got64), (np.isnan(want) & np.isnan(got64)) | (want == got64))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite & np.isfinite(got64), np.abs(got64 - want), 0.0)
    ref_norm = float(np.linalg.norm(np.where(finite, want, 0.0)))
    rel = float(np.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float(np.linalg.norm(diff))
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = max(ref_norm / np.sqrt(max(want.size, 1)), 1e-30)
    bad = ~same_special | (diff > tol * 100 * scale + tol * np.abs(np.where(finite, want, 0.0)))
    ok = rel <= tol and not bad.any()
    first = None
    g = w = None
    if bad.any():
        idx = np.unravel_index(int(np.argmax(bad)), bad.shape)
        first = tuple(int(i) for i in idx)
        g, w = float(got64[idx]), float(want[idx])
        ok = False
    return OutputCheck(name, rel, max_abs, first, g, w, ok)


def check_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray], dtype: str) -> list[OutputCheck]:
    return [check_output(name, got[name], want[name], dtype) for name in want]
