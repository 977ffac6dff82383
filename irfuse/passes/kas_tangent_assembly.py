"""kas-tangent-assembly: each program over a mesh replaced by the program that adds its
tangent's element blocks into a sparse matrix's values (`transforms.element_blocks`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.kas import ProgramOp
from irfuse.library.catalogue import default_library
from irfuse.transforms.element_blocks import assembly_program, element_jacobian_program


@dataclass(frozen=True)
class KasTangentAssembly(ModulePass):
    """`<name>_elements_jacobian_assembly`: the part between the gathers and the scatter of
    output `of` (its gathered rows as inputs), its Jacobian by the rows of nodal input `wrt`,
    each element's block added through a connectivity input `pairs` into the nodal output
    `values` (the runs of a CSR matrix's values, `irfuse.mesh.assembly`)."""

    name = "kas-tangent-assembly"
    of: str = ""
    wrt: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        library = default_library()
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            jac, _, _, blocks = element_jacobian_program(program, self.of, self.wrt, library, self.name)
            Rewriter.replace_op(program, assembly_program(jac, blocks, library, self.name), new_results=[])
        op.verify()
