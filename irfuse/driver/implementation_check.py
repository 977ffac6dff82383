"""Running implementations alone on the CPU, against the reference.

Used to refuse a hand-written implementation that disagrees with its op's
definition (the op library is handed `check_implementation` when the driver is
imported), and by the tests that run every implementation of every op.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block

from irfuse.backend.cuda_emit import emit_module
from irfuse.backend.compilers import compiler_for
from irfuse.diagnostics import CompileError
from irfuse.dialects import kas
from irfuse.dialects.element_types import element_type
from irfuse.library.implementations import Implementation
from irfuse.library.indexexpr import DefinitionError
from irfuse.passes.fuse_each import kernel_for_call


def kernel_name(impl: Implementation) -> str:
    return f"check_{impl.op.name}_{impl.name}"


def implementations_module(impls: list[Implementation], by: int | None = None) -> ModuleOp:
    """One `fuse.kernel` per implementation, each running its op once per element."""
    kernels = []
    for impl in impls:
        op = impl.op
        block = Block(arg_types=op.operand_types)
        for arg, name in zip(block.args, op.operand_names):
            arg.name_hint = name
        call = kas.CallOp(op.name, list(block.args), op.result_type)
        call.res.name_hint = "result"
        kernels.append(kernel_for_call(call, kernel_name(impl), impl, by))
    return ModuleOp(kernels)


def run_on_cpu(impls: list[Implementation], n: int, dtype=np.float64, seed: int = 0,
               by: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """kernel name -> (result of the generated code, reference), on random operands."""
    element = element_type("f64" if np.dtype(dtype) == np.float64 else "f32")
    module = implementations_module(impls, by)
    emitted = emit_module(module, element)
    host = compiler_for("cpu").compile(emitted.source, emitted.kernels, element)
    rng = np.random.default_rng(seed)
    out = {}
    for impl in impls:
        op = impl.op
        args = [rng.uniform(-1, 1, size=(n, *t.shape)).astype(dtype) for t in op.operand_types]
        result = np.full((n, *op.result_type.shape), np.nan, dtype=dtype)
        host.launch(kernel_name(impl), [*args, result], n)
        out[kernel_name(impl)] = (result, op.reference(*[a.astype(np.float64) for a in args]))
    return out


def check_implementation(impl: Implementation, library=None) -> None:
    """Raises `DefinitionError` unless `impl` matches the reference (float64, with a partial block)."""
    n = 2 * impl.recommended_by + 3
    try:
        (got, want), = run_on_cpu([impl], n).values()
    except CompileError as e:
        raise DefinitionError(f"implementation '{impl.name}' of '{impl.op.name}' does not compile:\n{e}") from None
    bad = ~np.isclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DefinitionError(
            f"implementation '{impl.name}' of '{impl.op.name}' disagrees with the definition "
            f"'{impl.op.definition}': element {idx[0]}, entry {list(idx[1:])}: got {got[idx]!r}, "
            f"expected {want[idx]!r} ({int(bad.sum())} of {bad.size} values differ)")
