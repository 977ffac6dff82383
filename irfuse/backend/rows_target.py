"""The `tangent-rows` target of irfuse-opt: prints the owner-computes assembly kernel
(`rows_emit`) of a program over a mesh's tangent, for FileCheck and for reading."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from irfuse.backend.cuda_target import target_element
from irfuse.backend.rows_emit import NotRowsForm, rows_module
from irfuse.diagnostics import CompileError
from irfuse.dialects.kas import GatherOp, ScatterOp, program_of
from irfuse.library.catalogue import default_library
from irfuse.transforms.element_blocks import element_jacobian_program, element_rows_program

WIDEST = 16  # the blocks of the widest node row the printed kernel is made for


@dataclass(frozen=True)
class TangentRowsTarget(Target):
    """The kernel of d r / d u (`-t tangent-rows`): r the program's one output made by a
    scatter, u the one nodal input gathered through that scatter's connectivity with r's
    shape (either missing or several: refused by name); int32 indices, a pattern whose
    widest node row holds WIDEST blocks, the module's element type."""

    name = "tangent-rows"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        program = program_of(module)
        names = dict(zip(program.body.block.args, program.inputs))
        scattered = [(name, v.owner) for name, v in zip(program.outputs, program.return_op.values)
                     if isinstance(v.owner, ScatterOp)]
        if len(scattered) != 1:
            raise CompileError(f"tangent-rows: @{program.sym_name.data} has {len(scattered)} outputs made by a "
                               "scatter; the target takes one")
        of, scatter = scattered[0]
        shape = tuple(scatter.res.type.shape)
        wrt = sorted({names[op.nodal] for op in program.body.block.ops if isinstance(op, GatherOp)
                      and op.index is scatter.index and op.nodal in names and tuple(op.nodal.type.shape) == shape})
        if len(wrt) != 1:
            raise CompileError(f"tangent-rows: @{program.sym_name.data} gathers {len(wrt)} nodal inputs shaped as "
                               f"'{of}' through its scatter's connectivity; the target takes one")
        library = default_library()
        jac, gathered, _, out = element_jacobian_program(program, of, wrt[0], library, "tangent-rows")
        rows = element_rows_program(program, of, wrt[0], library, "tangent-rows")
        k, d = scatter.index.type.count.data, scatter.res.type.size
        try:
            emitted = rows_module(jac, tuple(gathered), out, library, target_element(module), k, d, False, WIDEST, rows)
        except NotRowsForm as e:
            raise CompileError(f"tangent-rows: @{program.sym_name.data}: {e}") from None
        output.write(emitted.source)
