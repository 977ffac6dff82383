"""Registers and spills per thread of kernels compiled before, as an explicit input of the planner.

A kernel's ptxas report gives its registers and the bytes it spills; `signature` keys them
by what decides them (block shape, element size, global layout, and per op the
implementation, the places and offsets, remapping). `irfuse compile -o DIR` writes
`DIR/registers.json`; naming such a file (`--registers`, or `fuse-partition{registers=FILE}`)
lets the cost model use the recorded figures of a candidate with the same signature instead
of its estimate: the registers decide the blocks an SM holds, and the spilled bytes are
charged as local-memory traffic (`cost.spill_time`). Nothing is read unless it is named, so
the same inputs always give the same plan.

A table maps a signature to its registers (a number, as older tables hold) or to
`{"registers": R, "spill_bytes": S}` (S: ptxas's spill stores plus spill loads, bytes a thread).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from irfuse.artifact.user_files import read_text
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


@dataclass(frozen=True, order=True)
class CompiledFigures:
    """What ptxas made of one kernel: its registers a thread and the bytes a thread's spill
    stores and loads move (0: none)."""

    registers: int
    spill_bytes: int = 0

    def as_json(self) -> int | dict[str, int]:
        return self.registers if not self.spill_bytes else {"registers": self.registers,
                                                             "spill_bytes": self.spill_bytes}


def _figures(value) -> CompiledFigures | None:
    """A table entry as figures, None where it is neither form."""
    def whole(x, lo, hi):
        return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi

    if whole(value, 1, 255):
        return CompiledFigures(value)
    if isinstance(value, dict) and set(value) <= {"registers", "spill_bytes"} and whole(value.get("registers"), 1, 255) \
            and whole(value.get("spill_bytes", 0), 0, 1 << 24):
        return CompiledFigures(value["registers"], value.get("spill_bytes", 0))
    return None


def write_register_table(path: str, table: dict[str, CompiledFigures]) -> None:
    """The table as `load_register_table` reads it back (and `irfuse compile` writes it)."""
    with open(path, "w") as f:
        json.dump({k: v.as_json() for k, v in table.items()}, f, indent=1, sort_keys=True)


def load_register_table(path: str) -> dict[str, CompiledFigures]:
    """signature -> figures from a file written by `irfuse compile`; a clear error otherwise."""
    if path == "ptxas" and not os.path.exists(path):
        raise CompileError(Diagnostic("registers=ptxas is the compile's (irfuse compile --registers ptxas: "
                                      "plans compiled in turn); fuse-partition reads a register table's path",
                                      path))
    try:
        data = json.loads(read_text(path))
    except OSError as e:
        raise CompileError(Diagnostic(f"cannot read the register table: {e.strerror}", path)) from None
    except ValueError as e:
        raise CompileError(Diagnostic(f"the register table is not JSON: {e}", path)) from None
    table = {k: _figures(v) for k, v in data.items()} if isinstance(data, dict) else None
    if table is None or not all(isinstance(k, str) and v is not None for k, v in table.items()):
        raise CompileError(Diagnostic("a register table maps kernel signatures to register counts "
                                      "(1..255) or to {\"registers\": 1..255, \"spill_bytes\": bytes}, "
                                      "as 'irfuse compile' writes it", path))
    return table  # type: ignore[return-value]
