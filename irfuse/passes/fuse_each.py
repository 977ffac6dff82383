"""fuse-each: every `kas.call` and `kas.reduce` becomes its own `fuse.kernel`.

The unfused baseline: each kernel loads its operands into shared memory,
waits at a barrier, runs the call into shared memory, waits again and
stores the result; values travel between kernels through global memory.
A reduction's kernel loads its operand and stores the per-block partials, which a
`fuse.combine` then combines; literals (`kas.constant`) stay in the host program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.diagnostics import CompileError, UsageError
from irfuse.dialects import fuse, kas
from irfuse.dialects.fuse import MAX_THREADS_PER_BLOCK
from irfuse.library.catalogue import default_library, find_implementation
from irfuse.library.implementations import Implementation
from irfuse.passes.module_element_type import itemsize_of, layout_of
from irfuse.kernel.bridge import kernel_op
from irfuse.planner.cost import load_profile
from irfuse.planner.finish import check_finish, mark_finish
from irfuse.transforms.node_phases import refuse_nodal_statements
from irfuse.transforms.kernel_builder import build_kernel_model, erase_unread_gathers, launch_ops

REDUCE_BY = 128  # elements per block of a reduction's own kernel


def choose_implementation(op_name: str, impl_name: str) -> Implementation:
    """`impl_name` where the op has it, else the op's `elem` implementation."""
    try:
        return find_implementation(op_name, impl_name)
    except KeyError:
        return find_implementation(op_name, "elem")


def kernel_for_call(call: kas.CallOp, name: str, impl: Implementation, by: int | None,
                    layout: str = "aos", per_thread: int = 1, itemsize: int = 4) -> fuse.KernelOp:
    """One kernel running `call` with `impl`: load operands, barrier, call, barrier, store."""
    inputs = list(dict.fromkeys(call.args))  # an operand used twice is loaded once
    model = build_kernel_model([call], [impl], inputs, [call.res], by or impl.recommended_by, itemsize=itemsize,
                               layout=layout, per_thread=per_thread)
    return kernel_op(name, model, inputs, [call.res])


def kernel_for_reduce(reduce: kas.ReduceOp, name: str, by: int | None, layout: str = "aos",
                      per_thread: int = 1, itemsize: int = 4) -> fuse.KernelOp:
    """One kernel storing the per-block partials of `reduce`'s operand."""
    model = build_kernel_model([reduce], [], [reduce.operand], [reduce.res], by or REDUCE_BY, itemsize=itemsize,
                               layout=layout, per_thread=per_thread)
    return kernel_op(name, model, [reduce.operand], [reduce.res])


@dataclass(frozen=True)
class FuseEach(ModulePass):
    """Lowers every kas.call to its own fuse.kernel, values passing through global memory."""

    name = "fuse-each"
    impl: str = "elem"
    by: int | None = None
    per_thread: int = 1
    finish: str = "kernels"
    profile: str = "h100"
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "impl": "implementation to use where an op has it, elem elsewhere (see 'irfuse ops NAME')",
        "by": "elements per block (default: each implementation's recommended value)",
        "per_thread": "elements each thread runs (a power of two dividing every kernel's by; default 1)",
        "finish": "a reduction's partials: kernels: combined by combine kernels; last-block: by the reducing "
                  "kernel's last block on the GPU (launches of at most 8192 blocks); auto: there where the cost "
                  "model of the profile finds it faster",
        "profile": "device profile finish=auto predicts with",
    }

    def _check_impl_exists(self, calls: list[kas.CallOp]) -> None:
        lib = default_library()
        have = {i.name for c in calls for i in lib.implementations(lib.get(c.op_name))}
        if calls and self.impl not in have:
            raise CompileError(f"fuse-each: no op of the program has an implementation '{self.impl}' "
                               f"(they have: {', '.join(sorted(have))})")

    def _check_per_thread(self, by: int) -> None:
        if by % self.per_thread:
            raise UsageError(f"fuse-each: per_thread={self.per_thread} does not divide a kernel's {by} elements per "
                             "block (set by to a multiple of it)")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.by is not None and self.by < 1:
            raise CompileError("fuse-each: by must be positive")
        if self.per_thread < 1 or self.per_thread & (self.per_thread - 1):
            raise CompileError(f"fuse-each: per_thread must be a power of two, got {self.per_thread}")
        check_finish(self.finish, self.name)
        profile = load_profile(self.profile) if self.finish == "auto" else None
        layout, itemsize = layout_of(op), itemsize_of(op)
        for program in [p for p in op.walk() if isinstance(p, kas.ProgramOp)]:
            refuse_nodal_statements(program, self.name)
            calls = [c for c in program.body.walk() if isinstance(c, kas.CallOp)]
            self._check_impl_exists(calls)
            for i, call in enumerate(calls):
                name = f"{program.sym_name.data}_k{i}_{call.op_name}"
                impl = choose_implementation(call.op_name, self.impl)
                by = self.by or impl.recommended_by
                threads = impl.bx * by // self.per_thread
                if threads > MAX_THREADS_PER_BLOCK:
                    raise UsageError(f"fuse-each: by={self.by} gives '{call.op_name}' [{impl.name}] {threads} threads "
                                     f"per block; a block has at most {MAX_THREADS_PER_BLOCK}")
                self._check_per_thread(by)
                kernel = kernel_for_call(call, name, impl, self.by, layout, self.per_thread, itemsize)
                Rewriter.insert_op(kernel, InsertPoint.before(program))
                ops, values = launch_ops(name, list(dict.fromkeys(call.args)), [call.res], call.location)
                Rewriter.replace_op(call, ops, values)
            reductions = [r for r in program.body.block.ops if isinstance(r, kas.ReduceOp)]
            for i, reduce in enumerate(reductions):
                name = f"{program.sym_name.data}_r{i}_{reduce.reduce_kind.value}"
                self._check_per_thread(self.by or REDUCE_BY)
                kernel = kernel_for_reduce(reduce, name, self.by, layout, self.per_thread, itemsize)
                mark_finish(kernel, self.finish, profile)
                Rewriter.insert_op(kernel, InsertPoint.before(program))
                ops, values = launch_ops(name, [reduce.operand], [reduce.res], reduce.location)
                Rewriter.replace_op(reduce, ops, values)
            erase_unread_gathers(program)
