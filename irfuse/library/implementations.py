"""CUDA implementations of library ops, generated from their definitions.

An implementation fixes how threads share one element's work (`bx`
threads per element); the number of elements per block (`by`) stays free
and is chosen by the lowering, with `recommended_by` as the default.

`elem`: one thread computes the whole element (`bx = 1`).  Its device
function receives pointers to the thread's element of every operand and
of the result (in shared memory or in a register array: the code is the
same, and after inlining the register case has only constant indices).
All outputs are computed before any is written, so a result may share
storage with an operand.
"""

from __future__ import annotations

from dataclasses import dataclass

from irfuse.library.catalogue import Library, OpDef, default_library
from irfuse.library.indexexpr import to_c


@dataclass(frozen=True)
class Implementation:
    op: OpDef
    name: str
    bx: int
    recommended_by: int

    @property
    def function_name(self) -> str:
        return f"irf_{self.op.name}_{self.name}"

    def device_source(self) -> str:
        params = [f"const real_t* __restrict__ {n}" for n in self.op.operand_names]
        params.append("real_t* irf_result")
        names = self.op.operand_names
        lines = [f"// {self.op.name}: {self.op.definition}  [{self.name}: one thread per element]",
                 f"__device__ __forceinline__ void {self.function_name}({', '.join(params)})", "{"]
        for k, tree in enumerate(self.op.trees):
            lines.append(f"  const real_t r{k} = {to_c(tree, lambda o, off: f'{names[o]}[{off}]')};")
        for k in range(len(self.op.trees)):
            lines.append(f"  irf_result[{k}] = r{k};")
        lines.append("}")
        return "\n".join(lines)


def implementations(op: OpDef) -> list[Implementation]:
    return [Implementation(op, "elem", 1, 128)]


def find_implementation(op_name: str, impl_name: str, library: Library | None = None) -> Implementation:
    lib = library or default_library()
    op = lib.get(op_name)
    if op is None:
        raise KeyError(f"unknown op '{op_name}'")
    for impl in implementations(op):
        if impl.name == impl_name:
            return impl
    names = ", ".join(i.name for i in implementations(op))
    raise KeyError(f"op '{op_name}' has no implementation '{impl_name}' (it has: {names})")
