"""Registers per thread of kernels compiled before, as an explicit input of the planner.

A kernel's ptxas report gives its registers; `signature` keys them by what decides
them (block shape, element size, global layout, and per op the implementation, the places and
offsets, remapping). `irfuse compile -o DIR` writes `DIR/registers.json`; naming such
a file (`--registers`, or `fuse-partition{registers=FILE}`) lets the cost model use the
recorded count of a candidate with the same signature instead of its estimate. Nothing
is read unless it is named, so the same inputs always give the same plan.
"""

from __future__ import annotations

import json

from irfuse.kernel.model import KernelModel, OpKind
from irfuse.diagnostics import CompileError, Diagnostic


def signature(model: KernelModel) -> str:
    parts = [f"{model.bx}x{model.by}:{model.itemsize}" + (f":{model.layout}" if model.layout != "aos" else "")
             + (f":e{model.per_thread}" if model.per_thread != 1 else "")]
    for op in model.ops:
        if op.kind == OpKind.CALL:
            places = "".join("s" if model.values[a].shared else "r" for a in op.args)
            res = model.values[op.result]  # type: ignore[index]
            parts.append(f"c:{op.impl.function_name}:{places}{'s' if res.shared else 'r'}:"  # type: ignore[union-attr]
                         f"{[model.values[a].offset for a in op.args]}:{res.offset}:{int(op.remap)}")
        elif op.kind in (OpKind.LOAD, OpKind.STORE):
            v = model.values[op.value]  # type: ignore[index]
            parts.append(f"{op.kind[0]}:{v.size}:{v.offset if v.shared else 'r'}")
        else:
            parts.append("b")
    return "|".join(parts)


def load_register_table(path: str) -> dict[str, int]:
    """signature -> registers from a file written by `irfuse compile`; a clear error otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise CompileError(Diagnostic(f"cannot read the register table: {e.strerror}", path)) from None
    except ValueError as e:
        raise CompileError(Diagnostic(f"the register table is not JSON: {e}", path)) from None
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 255
            for k, v in data.items()):
        raise CompileError(Diagnostic("a register table maps kernel signatures to register counts "
                                      "(1..255), as 'irfuse compile' writes it", path))
    return data
