"""How the tools print throughput: the same rule in every table and line."""

from __future__ import annotations


def million_elements_per_second(n: int, seconds: float) -> str:
    """n elements in `seconds` as millions per second, with the digits that matter at any scale
    (a GPU's thousands, the CPU backend's fractions at a small batch: never a bare 0)."""
    if not seconds or seconds <= 0:
        return "-"
    rate = n / seconds / 1e6
    if rate >= 100:
        return f"{rate:.0f}"
    if rate >= 1:
        return f"{rate:.1f}"
    return f"{rate:.3g}"
