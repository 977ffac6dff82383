"""The CPU loop renderer: a `fuse.kernel` as a loop over its elements, each running the
kernel's ops once, the CPU backend's default rendering (issue 43). Where the CPU twin
(`render_cpu`) runs a block's emulated threads region by region through a scratch copy of
shared memory (staging every input and output through it, poisoning it before each block),
this runs each element's statements once: its inputs are read where they are (the element's
row of the global array) and a call whose result is stored to an output writes it into the
output's row, so an element's bytes move once, as a hand-written loop moves them; other
values live in the element's own arrays (registers, once the C++ compiler has them).

It walks the kernel as the CUDA emitter does (a subclass of it, so names, register values and
the aliasing of loop-carried values are the emitter's), with one thread an element: a shared
value at block offset OFF is the element's at OFF / by in an array of the kernel's shared
words / by (a value's rows lie contiguously, so places that the plan makes alias still do),
an op is its one-thread implementation called for thread (0, 0), a uniform input read where
it is. A reduction over the batch stages each element's words and, once the block's elements
have run, combines them by the GPU kernel's tree into the block's partial. A gathered value
reads each word from the row of the node its entry names; a scatter's rows are staged for the
block, and once its elements have run each of the block's groups adds its partials as the GPU
kernel's threads do (each partial's rows in slot order from its first: `block_scatters`). The
same implementations, the same tree and the same sums in the same order: the twin's bits.
Kernels it does not take (several threads an element, several elements a thread, a reduction
or a scatter's rows inside a loop, structures of arrays, strided views, padded offsets) keep
the twin: `NotRendered`.

Measured and left out: tiles of elements with each value as a structure of arrays (a loop
over a tile's lanes per statement, vectorized by the C++ compiler) were slower on arrays of
structures (StVenant 82 ms against 38 ms on two cores): transposing each element's rows into
the tile and back cost more than the vector arithmetic saved (benchmarks/NOTES.md).

A kernel with a long loop inside the element (more than `LANE_TRIPS` iterations: chains of
dependent steps, a square root and a division in each of the power iteration's 100) runs
`LANES` elements in lockstep: each element's statements before the loop, then each iteration
for every lane in turn, then each element's statements after it, every lane's values in arrays
of their own. One element's chain waits on its steps' latency; the lanes' independent chains
fill it (the power iteration 608 -> 159 ms, the precession 2,181 -> 634 ms on two cores,
benchmarks/NOTES.md, The CPU backend, 2026-11-27). Each element runs the same operations in the same
order, so the same bits. A short loop is left alone: the C++ compiler unrolls it whole and keeps
its values in registers, which lanes held in arrays would undo (the 4-step rotation loop: 11.8
-> 21.2 ms with lanes).

An input whose element rows are 64 bytes or more (StVenant's 81-word tensor, StVenantInner's
27-word one, BigFusion's 5x5 matrices) has the row of the element 2 KB on prefetched as each
element starts: the hardware's prefetcher alone left StVenant 10-15% slower (13.8-15.2 -> 12.8-13.3
ms on two cores, StVenantInner 5.3 -> 4.7-4.9; benchmarks/NOTES.md, The CPU backend, 2026-11-27). Narrower
rows are left to the hardware: prefetching every input (CflStep's 3-word rows) made CflStep 20%
slower (1.06 -> 1.30 ms): with a prefetch in them GCC no longer vectorized its loops across
elements (-fopt-info). An element loop with a call in vectors of its own (a hoisted uniform
operand, below) prefetches every input's rows: such a loop is not vectorized across elements
anyway (StrainEnergy's, with the vectors or without, -fopt-info), and its elements, faster,
outran the hardware's prefetcher on 16 cores (StrainEnergy 1.52-1.60 -> 0.92-1.17 ms; 2.50 ->
2.46 on two).

A kernel that gathers prefetches, as each element starts, the rows of the nodes that the
element `GATHER_AHEAD` on names (and the connectivity row twice as far on): about 5% on the
mesh residuals and the lumped mass on two cores. Rendering gathers and scatters as loops at
all (they were twins before, and the CPU profile planned them as twins: small gathering kernels
handing their values to loop kernels through memory) made the mesh examples one kernel each and
1.8-3.1x faster on two cores (benchmarks/NOTES.md, Meshes: gathers and scatters, 2026-11-28).

A call with a uniform operand takes that operand's words in vectors made once, before the loop
over blocks, and its outputs a vector at a time where they have one shape
(`render_uniform_vectors`: GCC otherwise rebuilds those vectors from scalar loads in every
element).

The host library runs it when built with `IRFUSE_CPU_LOOP` defined (`IRFUSE_CPU_RENDERER=loop`,
the default, `irfuse.backend.host_compile`); `IRFUSE_CPU_RENDERER=emulate` builds every
kernel's twin, as the tests of GPU code (deleted barriers, poisoned shared memory) need, and
the differential tests compare the two renderings' bits."""

from __future__ import annotations

from irfuse.artifact.scatter_groups import group_elements, slot_ctype
from irfuse.backend.cuda_emit import (KernelEmitter, call_impl, copy_pattern, element_major, gather_index,
                                      partial_sum, partial_write, tree_step)
from irfuse.backend.render_uniform_vectors import hoisted_form, hoisted_vectors
from irfuse.analysis.shared_accesses import tree_half
from irfuse.backend.kernel_body import LoopNode, node_text
from irfuse.backend.render_cpu import host_params
from irfuse.dialects import fuse
from irfuse.dialects.access_pattern import compile_start


# Elements run in lockstep by a kernel with a loop of more than LANE_TRIPS iterations (see the
# module): 8 lanes measured faster than 4 (the precession 743 -> 634 ms, the power iteration
# 219 -> 159 on two cores); GCC unrolls loops of up to 16 iterations whole (-fpeel-loops).
LANES = 8
LANE_TRIPS = 16

# An input whose element rows are PREFETCH_ROW bytes or more (every input, in a loop with a
# hoisted call) has the row of the element about PREFETCH_AHEAD bytes ahead prefetched as each
# element starts (see the module).
PREFETCH_ROW = 64
PREFETCH_AHEAD = 2048


class NotRendered(Exception):
    """The kernel holds what the loop renderer does not take (the message says what)."""


class ElementLoopEmitter(KernelEmitter):
    """The emitter's walk with per-element statements (see the module)."""

    def __init__(self, *args, **named):
        super().__init__(*args, **named)
        if self.bx != 1:
            raise NotRendered(f"{self.bx} threads an element")
        if self.soa or self.strided:
            raise NotRendered("structures of arrays or strided views")
        self.staged_ops = set()
        self.stored_in_place: set = set()  # stores whose value its call wrote into the row already
        self.in_place = self._rows_in_place()
        self.reductions: list[tuple[str, int, str, str]] = []  # (staging array, words, kind, partials)
        self.scatters: list[tuple[int, str, int, int]] = []  # (number, output, words an element, rows an element)
        self.rows_read: dict[str, int] = {}  # global array -> words of the element's row it reads
        self.gathered: dict[tuple[str, str], tuple[int, int]] = {}  # (nodal array, connectivity) -> (K, D)
        self.hoisted_functions: dict[str, list[str]] = {}  # calls' hoisted forms (render_uniform_vectors)
        self.hoisted: list[str] = []  # their call sites' vectors, made before the loop over blocks

    def _rows_in_place(self) -> dict:
        """Values read and written where they are in global memory, as the element's row, not
        copied into the element's words: a loaded input, and a call's result that is stored
        once to an output, where nothing else needs the value at its planned place (no loop
        carries it). A result written into the output's row is read back from there by later
        calls and reductions."""
        rows = {}
        for op in self.kernel.body.block.ops:
            if isinstance(op, fuse.LoadOp) and op.index is None and op.place.is_shared:
                if self._only_read(op.res, None):
                    rows[op.res] = self._row(op.source, op.res)
            elif isinstance(op, fuse.LoadOp) and op.index is None and not op.place.is_uniform:
                # (loaded into registers for the GPU's threads, `promotion`: calls read its row
                # where it is as they would its shared copy, the element's one thread here, from
                # the word the registers start at: a loop's `a[q]` loads only the words it reads)
                offset = self._register_row_offset(op.res)
                if offset is not None and all(isinstance(u.operation, fuse.CallOp) for u in op.res.uses):
                    rows[op.res] = self._row(op.source, op.res, offset)
            elif isinstance(op, fuse.CallOp) and op.place.is_shared:
                stores = [u.operation for u in op.res.uses if isinstance(u.operation, fuse.StoreOp)
                          and u.operation.reduce_kind is None and not u.operation.scatters]
                if len(stores) == 1 and stores[0].parent_op() is self.kernel and self._only_read(op.res, stores[0]):
                    rows[op.res] = self._row(stores[0].dest, op.res)
                    self.stored_in_place.add(stores[0])
        return rows

    def _row(self, array, value, offset: int = 0) -> str:
        """The element's row of global `array`, holding `value`'s words (from word `offset` on)."""
        return f"{self.names.get(array, 'g_')} + first * {value.type.size}" + (f" + {offset}" if offset else "")

    def _register_row_offset(self, value) -> int | None:
        """The word of its element's row at which a register value's words start (word k of the
        registers is word offset + k of the row, as the GPU's load reads them: its access
        pattern's start for the element's thread); None where its words are not so laid out."""
        ap, bx, remap = self.pattern(value)
        if remap or bx != 1 or not element_major(ap, bx, self.by, value.type.size):
            return None
        return compile_start(ap.start)(0, 0, bx, self.by)

    @staticmethod
    def _only_read(value, store) -> bool:
        """Whether every use of `value` but `store` reads it: a call's or copy's operand, a
        reduction's value, or (for a loaded value, `store` None) a store's value."""
        for use in value.uses:
            user = use.operation
            if user is store or isinstance(user, (fuse.CallOp, fuse.CopyOp)):
                continue
            if isinstance(user, fuse.StoreOp) and use.index == 0 and (store is None or user.reduce_kind is not None
                                                                       or user.scatters):
                continue
            return False
        return True

    # A kernel whose threads run several elements each (`elements_per_thread`) is the same
    # loop over its elements: each element's statements once, its register values its own.
    def each_element(self, statement: str) -> str:
        return statement

    def element(self, y: str) -> str:
        return y

    def reg_ref(self, v) -> str:
        return self.reg_name(v)

    def declare_register(self, v) -> None:
        known = len(self.regs)
        super().declare_register(v)
        if len(self.regs) > known:
            name, _ = self.regs[-1]
            self.regs[-1] = (name, self.reg_words[name])

    def rows_combinable(self, v, half: int) -> bool:
        return False

    def base(self, v, y: str) -> str:
        if v in self.in_place:
            return self.in_place[v]
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

    def finish_in_last_block(self) -> None:
        pass  # (the CPU runs the combine kernels: the GPU alone combines partials in a last block)

    def emit_barrier(self, op) -> None:
        pass  # one element at a time: nothing to wait for

    def emit_gather(self, op, src: str) -> None:
        """The element's gathered words, each from the row of the node its entry names: into
        the element's words, or its register array (the emitter's own, element `first`)."""
        gather = (self.names.get(op.index, "g_"), op.index.type.count.data, op.source.type.size)
        self.gathered[(src, gather[0])] = gather[1:]
        if not op.place.is_shared:
            super().emit_gather(op, src)
            return
        size = op.res.type.size
        self.line(f"  // {self.names.get(op.res, 'v_')}: gather {op.source.name_hint} through {op.index.name_hint}, "
                  "the element's rows")
        self.line(f"  for (int w = 0; w < {size}; ++w) ({self.base(op.res, 'ty')})[w] = "
                  f"{src}[{gather_index(gather, 'first', 'w')}];")

    def emit_scatter_rows(self, op) -> None:
        """The element's rows staged for its block's group sums (`block_scatters`), which run
        once every element of the block has run."""
        if op.parent_op() is not self.kernel:
            raise NotRendered("a scatter's rows inside a loop")
        size, k = op.value.type.size, tuple(op.value.type.shape)[0]
        j = self.group_number(op)
        self.scatters.append((j, self.names.get(op.dest, "g_"), size, k))
        self.line(f"  // the rows of {op.value.name_hint}: the element's words staged for its block's group sums")
        self.line(f"  for (int k = 0; k < {size}; ++k) irf_rows{j}[(first - irf_first) * {size} + k] = "
                  f"({self.base(op.value, 'ty')})[k];")

    def block_scatters(self) -> list[str]:
        """Each scatter's partials of the block's groups (`artifact.scatter_groups`): partial p
        the rows of its slots added in slot order, its first row first, as the GPU kernel's
        threads add them (so the same bits); with null members (atomics) every row as it is."""
        lines = []
        for j, dst, size, k in self.scatters:
            group = group_elements(k)
            per_group, row, stage = group * k, size // k, f"irf_rows{j}"
            lines += [f"if (irf_members{j} == nullptr) {{  // (atomics: every row as it is)",
                      f"  for (int irf_i = 0; irf_i < irf_count * {size}; ++irf_i) "
                      f"{dst}[irf_first * {size} + irf_i] = {stage}[irf_i];",
                      "} else {",
                      f"  const long long irf_g0 = irf_first / {group};",
                      f"  for (int irf_g = 0; irf_g < (irf_count + {group - 1}) / {group}; ++irf_g) {{",
                      f"    const {slot_ctype(k)}* const irf_m = irf_members{j} + (irf_g0 + irf_g) * {per_group};",
                      f"    const int irf_b = irf_g * {per_group};",
                      f"    const int irf_slots = irf_count * {k} - irf_b < {per_group} ? irf_count * {k} - irf_b "
                      f": {per_group};",
                      f"    const long long irf_p1 = irf_bases{j}[irf_g0 + irf_g + 1];",
                      f"    for (long long irf_p = irf_bases{j}[irf_g0 + irf_g]; irf_p < irf_p1; ++irf_p) {{",
                      f"      const int irf_m0 = irf_firsts{j}[irf_p], "
                      f"irf_m1 = irf_p + 1 < irf_p1 ? irf_firsts{j}[irf_p + 1] : irf_slots;",
                      *("      " + line for line in partial_sum(lambda s: f"{stage}[({s}) * {row} + irf_c]", dst, row)),
                      "    }",
                      "  }",
                      "}"]
        return lines

    def emit_reduce(self, op) -> None:
        """The element's words staged for its block's tree (`block_trees`), which runs once
        every element of the block has run."""
        if op.parent_op() is not self.kernel:
            raise NotRendered("a reduction inside a loop")
        size = op.value.type.size
        red = f"irf_red{len(self.reductions)}"
        self.reductions.append((red, size, op.reduce_kind.value, self.names.get(op.dest, "g_")))
        self.line(f"  // {op.reduce_kind.value} of {op.value.name_hint}: the element's words staged for its block's "
                  "tree")
        self.line(f"  for (int k = 0; k < {size}; ++k) {red}[(first - irf_first) * {size} + k] = "
                  f"({self.base(op.value, 'ty')})[k];")

    def block_trees(self) -> list[str]:
        """Each reduction's block partial: the GPU's tree over the block's staged elements
        (element i < half takes element i + half where that exists, half halving to 1: the
        same pairs in the same order as the kernel's shared and warp steps, so the same
        bits), word k written at k * blocks + block."""
        lines = []
        for red, size, kind, dst in self.reductions:
            halves = []
            half = tree_half(self.by) if self.by > 1 else 0
            while half >= 1:
                halves.append(half)
                half //= 2
            # A whole block's steps need no test where element i + half exists for every i <
            # half (2 half <= by): loops the compiler vectorizes (the tests cost a reduction
            # of a cheap element a twentieth of its time).
            # (a tree has steps where by > 1, and its last, half 1, is always one of those)
            if halves:
                whole = [tree_step(red, kind, size, h, None if 2 * h <= self.by else "irf_count", "0", 1)
                         for h in halves]
                partial = [tree_step(red, kind, size, h, "irf_count", "0", 1) for h in halves]
                lines += [f"if (irf_count == {self.by}) {{", *("  " + x for x in whole), "} else {",
                          *("  " + x for x in partial), "}"]
            lines.append(partial_write(dst, red, size, self.by, "irf_block", "0", 1))
        return lines

    def emit_call(self, op) -> None:
        if op.remapped or call_impl(op, self.library).bx != 1:
            raise NotRendered(f"{op.op_name} on several threads an element")
        super().emit_call(op)

    def callee(self, op, impl, variant: str) -> tuple[str, list[str]]:
        """A call with a uniform operand runs its hoisted form where it has one, given this
        site's vectors (`render_uniform_vectors`), made before the loop over blocks."""
        form = hoisted_form(impl, variant, self.itemsize)
        if form is None:
            return super().callee(op, impl, variant)
        array = f"irf_h{len(self.hoisted)}"
        self.hoisted.append(hoisted_vectors(form, impl, variant, array, [self.base(a, "ty") for a in op.args]))
        self.hoisted_functions.setdefault(form.name, form.lines)
        return form.name, [array]

    def emit_copy(self, op) -> None:
        _, bx, remap = copy_pattern(self.model, self.mops[id(op)], self.patterns)
        if remap or bx != 1:
            raise NotRendered("a copy on several threads an element")
        super().emit_copy(op)

    def emit_load(self, op) -> None:
        if op.index is None and (op.place.is_shared or op.res in self.in_place):
            self.rows_read.setdefault(self.names.get(op.source, "g_"), op.res.type.size)
            self.line(f"  // {self.names.get(op.res, 'v_')}: load {op.source.name_hint}, the element's row")
            if op.res in self.in_place:
                self.line("  // (read where it is)")
            else:
                self._row_copy(op.res, op.source, load=True)
            return
        super().emit_load(op)

    def emit_row_store(self, op) -> None:
        place = fuse.place_of(op.value)
        if place is not None and place.is_shared:
            self.line(f"  // store into {op.dest.name_hint}, the element's row")
            if op in self.stored_in_place:
                self.line("  // (written there by the call)")
            else:
                self._row_copy(op.value, op.dest, load=False)
            return
        super().emit_row_store(op)

    def _row_copy(self, value, array, load: bool) -> None:
        """The element's row of global `array` copied into shared `value`'s words, or back."""
        size = value.type.size
        mine, row = f"({self.base(value, 'ty')})[k]", f"{self.names.get(array, 'g_')}[first * {size} + k]"
        self.line(f"  for (int k = 0; k < {size}; ++k) {mine if load else row} = {row if load else mine};")


def cpu_loop_kernel(kernel: fuse.KernelOp, itemsize: int, library=None, strided=None) -> tuple[list[str], set] | None:
    """The kernel's loop over elements (the twin's signature: blocks `block_begin` to
    `block_end`; `reverse`, which makes the twin run a block's threads last to first to show
    a missing barrier, means nothing to independent elements: 10-20% faster without its
    select) and the device-function variants it calls; None where it holds what this
    renderer does not take."""
    rendered, _ = loop_rendering(kernel, itemsize, library, strided)
    return rendered


def loop_rendering(kernel: fuse.KernelOp, itemsize: int, library=None,
                   strided=None) -> tuple[tuple[list[str], set] | None, str]:
    """`cpu_loop_kernel`'s rendering, or None and what in the kernel this renderer does not take."""
    try:
        return _rendered(kernel, itemsize, library, strided), ""
    except NotRendered as e:
        return None, str(e)


def _rendered(kernel: fuse.KernelOp, itemsize: int, library, strided) -> tuple[list[str], set]:
    emitter = ElementLoopEmitter(kernel, itemsize, None, library, strided)
    body = emitter.describe()
    if body.block_arrays:
        raise NotRendered("shared arrays of the block")
    params = host_params(body)
    by = body.by
    words = -(-body.words // by)
    lines = [*(line for form in emitter.hoisted_functions.values() for line in form),
             f"// fuse.kernel @{body.info.name} on the CPU: a loop over elements, {words} words each besides "
             "its registers",
             f"static int {body.info.name}({', '.join(params)})",
             "{",
             "  (void)reverse;  // (elements are independent: their order is the twin's check)",
             *("  " + line for line in emitter.hoisted),
             "  for (long long irf_block = block_begin; irf_block < block_end; ++irf_block) {",
             f"    const long long irf_first = irf_block * {by};",
             f"    const int irf_count = n - irf_first < {by} ? (int)(n - irf_first) : {by};",
             *[f"    real_t {red}[{by * size}];" for red, size, _, _ in emitter.reductions],
             *[f"    real_t irf_rows{j}[{by * size}];" for j, _, size, _ in emitter.scatters]]
    if not _statements_and_loops(body.body):  # (the walk emits no barrier; reductions make GPU-only nodes)
        raise NotRendered("a barrier or statements for the GPU only")
    arrays = ([("irf_es", words)] if body.words else []) + list(body.regs)
    if any(isinstance(n, LoopNode) and n.trips > LANE_TRIPS for n in body.body):
        lines += _in_lanes(body.body, arrays)
    else:
        lines += ["    for (int irf_t = 0; irf_t < irf_count; ++irf_t) {",
                  "      const long long first = irf_first + irf_t;",
                  *_prefetches(emitter.rows_read, itemsize, every=bool(emitter.hoisted)),
                  *_gather_prefetches(emitter.gathered),
                  *_ELEMENT,
                  *[f"      real_t {name}[{n}];" for name, n in arrays],
                  *["      " + line for line in node_text(body.body)]]
    lines += ["    }", *["    " + line for line in emitter.block_trees()],
              *["    " + line for line in emitter.block_scatters()], "  }", "  return 0;", "}"]
    return lines, emitter.used


def _prefetches(rows: dict[str, int], itemsize: int, every: bool) -> list[str]:
    """The element loop's prefetch of each wide input's row (`every` input's: a loop with a
    hoisted call) `PREFETCH_AHEAD` bytes on (see the module): a line at a time, for elements
    that exist."""
    lines = []
    for name, words in rows.items():
        row = words * itemsize
        if row >= PREFETCH_ROW or every:
            ahead = -(-PREFETCH_AHEAD // row)
            lines.append(f"      if (first + {ahead} < n) for (int k = 0; k < {row}; k += 64) "
                         f"IRF_PREFETCH((const char*)({name} + (first + {ahead}) * {words}) + k);")
    return lines


def _gather_prefetches(gathered: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    """The rows of the nodes an element `GATHER_AHEAD` on names, prefetched as each element
    starts (its connectivity row `2 GATHER_AHEAD` on first, so that the node numbers read for
    the prefetch are in the caches); for elements that exist."""
    lines = []
    for conn in dict.fromkeys(c for _, c in gathered):
        k = next(k for (_, c), (k, _) in gathered.items() if c == conn)
        lines.append(f"      if (first + {2 * GATHER_AHEAD} < n) IRF_PREFETCH((const char*)({conn} + (first + "
                     f"{2 * GATHER_AHEAD}) * {k}));")
    for (src, conn), (k, d) in gathered.items():
        node = f"(long long){conn}[(first + {GATHER_AHEAD}) * {k} + j]"
        lines.append(f"      if (first + {GATHER_AHEAD} < n) for (int j = 0; j < {k}; ++j) "
                     f"IRF_PREFETCH((const char*)({src} + {node} * {d}));")
    return lines


GATHER_AHEAD = 8  # elements: an element's code is some hundreds of instructions (see the module)


# An element's thread coordinates, as the implementations' one-thread variants take them.
_ELEMENT = ["      const int tx = 0, ty = 0, tid = 0, count = 1;",
            "      const bool active = true;",
            "      (void)tx; (void)ty; (void)tid; (void)count; (void)active;"]


def _in_lanes(nodes: list, arrays: list[tuple[str, int]]) -> list[str]:
    """The block's elements `LANES` at a time (see the module): each top-level statement list
    run for every lane, each top-level loop's iterations run for every lane in turn; a lane's
    arrays are its own, named as the element's were."""
    lane = ["for (int irf_g = 0; irf_g < irf_lanes; ++irf_g) {",
            "  const long long first = irf_first + irf_t + irf_g;",
            *["  " + line.strip() for line in _ELEMENT],
            *[f"  real_t* const {name} = irf_L{name}[irf_g];" for name, _ in arrays]]
    out = [f"    for (int irf_t = 0; irf_t < irf_count; irf_t += {LANES}) {{",
           f"      const int irf_lanes = irf_count - irf_t < {LANES} ? irf_count - irf_t : {LANES};",
           *[f"      real_t irf_L{name}[{LANES}][{n}];" for name, n in arrays]]
    for node in nodes:
        if isinstance(node, LoopNode):  # (every lane's element is active: the test is the GPU's)
            out += ["      " + node.loop,
                    *["        " + line for line in lane], *["        " + line for line in node_text(node.children)],
                    "        }", "      }"]
        else:
            out += [*["      " + line for line in lane], *["      " + line for line in node_text([node])], "      }"]
    return out


def _statements_and_loops(nodes: list) -> bool:
    """Whether the body holds only statement lists and loops of them (`node_text` then writes
    what every element runs)."""
    return all(isinstance(n, list) or (isinstance(n, LoopNode) and _statements_and_loops(n.children)) for n in nodes)
