"""The owner-computes assembly of a mesh program's tangent compiled: the kernel of
`backend.rows_emit` for a per-element Jacobian, as an artifact of one kernel (no host
steps: `irfuse.api.tangents` launches it over the nodes) with the binary its backend runs."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from irfuse.artifact.arrays import element_type
from irfuse.artifact.artifact import Artifact
from irfuse.artifact.host_plan import HostPlan
from irfuse.backend.rows_emit import NotRowsForm, rows_module
from irfuse.dialects.kas import program_of
from irfuse.driver.binaries import with_binaries
from irfuse.library.catalogue import default_library


def rows_artifact(module: ModuleOp, gathered: tuple[str, ...], out: str, dtype: str, backend: str,
                  arch: str | None, k: int, d: int, wide: bool, widest: int, rows: tuple | None = None) -> Artifact | None:
    """The artifact of the owner-computes kernel for `module`'s per-element Jacobian (output
    `out`) on `backend` ('cpu', or 'cuda' for `arch`), its binary built; `rows`: the
    element part's vector-Jacobian product the GPU's slots compute their block rows by
    (`front.element_rows`), or None; None where the program is not of the form the kernel
    runs (`rows_emit.NotRowsForm`)."""
    element = element_type(dtype)
    try:
        emitted = rows_module(program_of(module), gathered, out, default_library(), element, k, d, wide, widest, rows)
    except NotRowsForm:
        return None
    artifact = Artifact(element.name, "aos", emitted.source, list(emitted.kernels),
                        HostPlan((), (), (), (), (), name="tangent rows"), meta={"kind": "tangent rows"})
    return with_binaries(artifact, backend, arch)
