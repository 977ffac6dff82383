"""One kernel as the emitter describes it before writing it out: its body as a tree of
statement lists, barriers and loops (`BARRIER`, `WARP_BARRIER`, `LoopNode`, `GpuOnly`), its
register values, its shared arrays apart from the planned buffer, and its launch interface
(`KernelInfo`). `cuda_emit` builds a `KernelBody` from a `fuse.kernel`; two renderers write
it out: `render_gpu` the `__global__` kernel, `render_cpu` its CPU twin, a function that runs
blocks the way CPU implementations of OpenCL run work-groups. Both read the same tree, so the
two run the same statements in the same order.
"""

from __future__ import annotations

from dataclasses import field

from irfuse.artifact.kernel_info import KernelInfo
from irfuse.artifact.records import record

STATIC_SHARED_LIMIT = 48 * 1024  # bytes a kernel may declare statically


class LoopNode:
    """A `fuse.loop` in the emitted body: its header and its statements (see `KernelBody`).
    `loop` is the `for` line alone, `guard` what runs it only for present elements (empty
    where the body guards itself), `trips` its trip count."""

    def __init__(self, loop: str, trips: int, guard: str = "") -> None:
        self.loop, self.trips, self.guard = loop, trips, guard
        self.children: list = []

    @property
    def header(self) -> str:
        return f"  {self.guard}{self.loop}"


BARRIER = object()  # a barrier in the emitted body
# A barrier among the first warp's threads only (`__syncwarp()`: the warp's shared-memory
# writes are seen by its threads after it), for steps no other thread takes part in; on the
# CPU it ends a region as `BARRIER` does.
WARP_BARRIER = object()

# How a reduction combines two values a and b (C expressions); NaN propagates in max and min
# as in the reference (numpy.max), whichever side it is on.
COMBINE = {
    "sum": "{a} + {b}",
    "max": "irf_max({a}, {b})",
    "min": "irf_min({a}, {b})",
}


@record
class GpuOnly:
    """Statements the GPU runs (`gpu`, lines) in place of body nodes the CPU runs (`cpu`:
    statement lists and barriers), with the same operations in the same order: warp
    shuffles where the CPU, whose regions are loops over threads, goes through shared memory."""
    gpu: list[str]
    cpu: list


def is_barrier(n) -> bool:
    return n is BARRIER or n is WARP_BARRIER


def has_barrier(nodes: list) -> bool:
    return any(is_barrier(n) or (isinstance(n, LoopNode) and has_barrier(n.children))
               or (isinstance(n, GpuOnly) and has_barrier(n.cpu)) for n in nodes)


def node_text(nodes: list, indent: str = "") -> list[str]:
    """The statements of body nodes as the GPU runs them: barriers as __syncthreads(), loops
    as `for` (also the text of a loop without barriers inside a CPU region)."""
    out: list[str] = []
    for n in nodes:
        if n is BARRIER:
            out.append(indent + "  __syncthreads();")
        elif n is WARP_BARRIER:
            out.append(indent + "  __syncwarp();")
        elif isinstance(n, LoopNode):
            out += [indent + n.header, *node_text(n.children, indent + "  "), indent + "  }"]
        elif isinstance(n, GpuOnly):
            out += [indent + line for line in n.gpu]
        else:
            out += [indent + line for line in n]
    return out


@record
class KernelBody:
    """What both renderers write out of one kernel (see the module's docstring)."""

    info: KernelInfo  # its launch interface, final (shared arrays, dynamic shared memory) once built
    itemsize: int
    bx: int
    by: int
    elements_per_thread: int
    nthreads: int
    words: int  # of the planned shared buffer
    min_blocks: int  # the launch bounds' minimum resident blocks
    soa: bool  # its global arrays are structures of arrays
    inputs: list[str]  # the C names of its global input arrays, in order
    outputs: list[str]  # and of its output arrays
    body: list  # the statement tree
    regs: list[tuple[str, int]]  # register values: C name, words per thread
    block_arrays: list[tuple[str, int]]  # shared arrays apart from the planned buffer: name, words
    staged_arrays: set[str] = field(default_factory=set)  # those of staged loads (the CPU twin has none)
    staged_sources: list[str] = field(default_factory=list)  # the global arrays staged loads copy from
    # Uniform inputs every launch gives the same literal (`kernel.bridge.literal_arguments`): C name, the
    # literal. Each is a constant array of the kernel's own, so the C compiler folds it.
    constants: list[tuple[str, str]] = field(default_factory=list)
    # Uniform inputs fixed when compiling (`kas.table`s): C name, the literals of their words. Each
    # is an array of the module's, declared before the kernel (`table_arrays`).
    tables: list[tuple[str, list[str]]] = field(default_factory=list)


def constant_arrays(body: KernelBody) -> list[str]:
    """The literals every launch gives for some uniform inputs, as constant arrays of the
    kernel's own (both renderers): the C compiler folds them into the arithmetic."""
    return [f"  const real_t {name}[1] = {{{literal}}};" for name, literal in body.constants]


def table_arrays(body: KernelBody, qualifier: str) -> list[str]:
    """The kernel's tables (`KernelBody.tables`) as arrays of the module declared before it:
    `__constant__` on the GPU (the constant bank: read by the arithmetic as operands where
    their indices are known when compiling, through the constant cache elsewhere), `static
    const` on the CPU."""
    return [f"{qualifier} real_t {name}[{len(words)}] = {{{', '.join(words)}}};" for name, words in body.tables]
