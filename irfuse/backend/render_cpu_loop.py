"""The CPU loop renderer: a `fuse.kernel` as a loop over its elements, each running the
kernel's ops with every value in arrays of its own (registers, once the C++ compiler has
them), the first step of a CPU backend of its own (issue 43). Where the CPU twin
(`render_cpu`) runs a block's emulated threads region by region through a scratch copy of
shared memory (staging every input and output through it, poisoning it before each block),
this runs each element's statements once, reading its inputs' rows and writing its outputs'
rows in place.

It walks the kernel as the CUDA emitter does (a subclass of it, so names, register values and
the aliasing of loop-carried values are the emitter's), with one thread an element: a shared
value at block offset OFF is the element's at OFF / by in an array of the kernel's shared
words / by (a value's rows lie contiguously, so places that the plan makes alias still do),
an op is its one-thread implementation called for thread (0, 0), a uniform input read where
it is. The same implementations in the same order: the twin's bits. Kernels it does not take
(several threads an element, reductions, gathers, structures of arrays, strided views, padded
offsets) keep the twin: `NotRendered`.

The host library runs it when built with `IRFUSE_CPU_LOOP` defined (`IRFUSE_CPU_RENDERER=loop`,
`irfuse.backend.host_compile`); by default the twin runs, as the tests of GPU code expect."""

from __future__ import annotations

from irfuse.backend.cuda_emit import _KernelEmitter, call_impl, copy_pattern
from irfuse.backend.kernel_body import LoopNode, node_text
from irfuse.backend.render_cpu import host_params
from irfuse.dialects import fuse


class NotRendered(Exception):
    """The kernel holds what the loop renderer does not take (the message says what)."""


class _ElementLoopEmitter(_KernelEmitter):
    """The emitter's walk with per-element statements (see the module)."""

    def __init__(self, *args, **named):
        super().__init__(*args, **named)
        if self.bx != 1 or self.elements_per_thread != 1:
            raise NotRendered(f"{self.bx} threads an element, {self.elements_per_thread} elements a thread")
        if self.soa or self.strided:
            raise NotRendered("structures of arrays or strided views")
        self.staged_ops = set()

    def base(self, v, y: str) -> str:
        place = fuse.place_of(v)
        if place is not None and place.is_shared:
            offset = place.offset.data
            if offset % self.by:
                raise NotRendered(f"a shared value at offset {offset}, not a multiple of {self.by} rows")
            return f"irf_es + {offset // self.by}"
        return super().base(v, y)

    def stage_uniform_inputs(self) -> None:
        for i in self.kernel.uniform_positions:
            g = self.kernel.input_args[i]
            self.uniform_copies[g] = self.names.get(g, "g_")  # read where it is

    def emit_barrier(self, op) -> None:
        pass  # one element at a time: nothing to wait for

    def emit_gather(self, op, src: str) -> None:
        raise NotRendered("a gather")

    def emit_reduce(self, op) -> None:
        raise NotRendered("a reduction")

    def emit_call(self, op) -> None:
        if op.remapped or call_impl(op, self.library).bx != 1:
            raise NotRendered(f"{op.op_name} on several threads an element")
        super().emit_call(op)

    def emit_copy(self, op) -> None:
        _, bx, remap = copy_pattern(self.model, self.mops[id(op)])
        if remap or bx != 1:
            raise NotRendered("a copy on several threads an element")
        super().emit_copy(op)

    def emit_load(self, op) -> None:
        if op.index is not None:
            raise NotRendered("a gather")
        if op.place.is_shared:
            self.line(f"  // {self.names.get(op.res, 'v_')}: load {op.source.name_hint}, the element's row")
            self._row_copy(op.res, op.source, load=True)
            return
        super().emit_load(op)

    def emit_store(self, op) -> None:
        if op.reduce_kind is not None:
            raise NotRendered("a reduction")
        place = fuse.place_of(op.value)
        if place is not None and place.is_shared:
            self.line(f"  // store into {op.dest.name_hint}, the element's row")
            self._row_copy(op.value, op.dest, load=False)
            return
        super().emit_store(op)

    def _row_copy(self, value, array, load: bool) -> None:
        """The element's row of global `array` copied into shared `value`'s words, or back."""
        size = value.type.size
        mine, row = f"({self.base(value, 'ty')})[k]", f"{self.names.get(array, 'g_')}[first * {size} + k]"
        self.line(f"  for (int k = 0; k < {size}; ++k) {mine if load else row} = {row if load else mine};")


def cpu_loop_kernel(kernel: fuse.KernelOp, itemsize: int, library=None, strided=None) -> tuple[list[str], set] | None:
    """The kernel's loop over elements (the twin's signature: blocks `block_begin` to
    `block_end`, `reverse` running a block's elements last to first) and the device-function
    variants it calls; None where it holds what this renderer does not take."""
    try:
        return _rendered(kernel, itemsize, library, strided)
    except NotRendered:
        return None


def _rendered(kernel: fuse.KernelOp, itemsize: int, library, strided) -> tuple[list[str], set]:
    emitter = _ElementLoopEmitter(kernel, itemsize, None, library, strided)
    body = emitter.describe()
    if body.block_arrays:
        raise NotRendered("shared arrays of the block")
    params = host_params(body)
    by = body.by
    words = -(-body.words // by)
    lines = [f"// fuse.kernel @{body.info.name} on the CPU: a loop over elements, {words} words each besides "
             "its registers",
             f"static int {body.info.name}({', '.join(params)})",
             "{",
             "  for (long long irf_block = block_begin; irf_block < block_end; ++irf_block) {",
             f"    const long long irf_first = irf_block * {by};",
             f"    const int irf_count = n - irf_first < {by} ? (int)(n - irf_first) : {by};",
             "    for (int irf_t = 0; irf_t < irf_count; ++irf_t) {",
             "      const long long first = irf_first + (reverse ? irf_count - 1 - irf_t : irf_t);",
             "      const int tx = 0, ty = 0, tid = 0, count = 1;",
             "      const bool active = true;",
             "      (void)tx; (void)ty; (void)tid; (void)count; (void)active;"]
    if body.words:
        lines.append(f"      real_t irf_es[{words}];")
    lines += [f"      real_t {name}[{n}];" for name, n in body.regs]
    if not _statements_and_loops(body.body):  # (the walk emits no barrier; reductions make GPU-only nodes)
        raise NotRendered("a barrier or statements for the GPU only")
    lines += ["      " + line for line in node_text(body.body)]
    lines += ["    }", "  }", "  return 0;", "}"]
    return lines, emitter.used


def _statements_and_loops(nodes: list) -> bool:
    """Whether the body holds only statement lists and loops of them (`node_text` then writes
    what every element runs)."""
    return all(isinstance(n, list) or (isinstance(n, LoopNode) and _statements_and_loops(n.children)) for n in nodes)
