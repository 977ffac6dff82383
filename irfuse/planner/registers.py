"""Registers per thread of kernels compiled before, read from the ptxas report.

`build_plan` records every compiled kernel's registers under a signature of its
`KernelModel` (block shape, element size, and per op the implementation, the
places and offsets, remapping); the cost model uses a recorded count for a
candidate with the same signature, and an estimate otherwise.
"""

from __future__ import annotations

import json
import os

from irfuse.analysis.kernel_model import KernelModel


def signature(model: KernelModel) -> str:
    parts = [f"{model.bx}x{model.by}:{model.itemsize}"]
    for op in model.ops:
        if op.kind == "call":
            places = "".join("s" if model.values[a].shared else "r" for a in op.args)
            res = model.values[op.result]  # type: ignore[index]
            parts.append(f"c:{op.impl.function_name}:{places}{'s' if res.shared else 'r'}:"  # type: ignore[union-attr]
                         f"{[model.values[a].offset for a in op.args]}:{res.offset}:{int(op.remap)}")
        elif op.kind in ("load", "store"):
            v = model.values[op.value]  # type: ignore[index]
            parts.append(f"{op.kind[0]}:{v.size}:{v.offset if v.shared else 'r'}")
        else:
            parts.append("b")
    return "|".join(parts)


def _path() -> str:
    from irfuse.backend.nvrtc import cache_dir

    return os.path.join(cache_dir(), "registers.json")


def _load() -> dict:
    try:
        with open(_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


_MEMO: dict | None = None


def known_registers(model: KernelModel) -> int | None:
    global _MEMO
    if _MEMO is None:
        _MEMO = _load()
    return _MEMO.get(signature(model))


def record(entries: dict[str, int]) -> None:
    """Adds signature -> registers entries (written atomically; a lost race only loses a hint)."""
    global _MEMO
    data = _load()
    data.update(entries)
    _MEMO = data
    from irfuse.backend.nvrtc import _atomic_write

    try:
        _atomic_write(_path(), json.dumps(data).encode())
    except OSError:
        pass
