"""CUDA C emission for `fuse` kernels: each kernel's statements built from its IR into a
`KernelBody` (`kernel_body`), written out by the GPU renderer (`render_gpu`) and its CPU twin's
(`render_cpu`); the combine kernels (`combine_emit`); the module's source, which starts with
`irfuse_prelude.h`.

The emitted source is self-contained and compiles unchanged with NVRTC
(for the GPU) and with the host C++ compiler plus `irfuse_host.h` (for CPU
execution).  Conventions:

- `real_t` is `float` or `double` (`IRFUSE_REAL`, defined at the top of the
  source for float64);
- kernel parameters: the global input arrays, the output arrays, then the
  batch size `n` (`long long`); all element offsets are 64-bit;
- block `(bx, by)`: `by` elements per block, `bx` threads per element; the
  last block may hold fewer than `by` elements (`count`), and threads of
  missing elements skip the calls but still reach every barrier; a kernel
  whose threads run E elements each (`elements_per_thread`) has by/E thread
  rows, and each per-element statement is a loop over the thread's elements
  ty, ty + by/E, ... (`irf_y`, unrolled on the GPU, `IRF_UNROLL`), its
  register values E rows of words (row `irf_e` for element `irf_y`);
- shared values hold the block's elements element after element, exactly
  as an array of structures holds them in global memory, so loads and stores
  are contiguous copies by all threads (coalesced); register values hold the
  thread's own element;
- in a structure-of-arrays kernel (`layout(soa)`) word k of element e is
  `g[k*n + e]`: the block copies a shared value one word's run of elements
  at a time, and a register value's words are read and written by each
  thread for its own element, consecutive threads on consecutive elements;
  the kernel's leading register loads (`staged_run_loads`: all or none) go
  through shared arrays of their own on the GPU, the block copying each
  value's runs 16 bytes at a time where the block is full and the arrays
  aligned (`irf_runs16`), then one barrier before each thread reads its words;
- every kernel starts (after its shared declarations) with `irf_after_previous_grid()`:
  launched as a programmatic dependent launch (sm_90, `runtime.dependent_launch`) it
  waits there for the previous kernel on its stream to complete, then lets the next be
  scheduled; otherwise (and on the CPU, where it is empty) it passes at once;
- a program input or output that is a strided view (`kas.strides`,
  `strided_arguments`) is read and written word by word at its strides, the
  words of a shared value by the whole block, a register value's by each
  thread for its own element.

Each kernel comes twice, from the same statements: the `__global__` kernel
for the GPU (`render_gpu`), and (under `IRFUSE_HOST`) a host function that runs a range of
blocks the way CPU implementations of OpenCL do (`render_cpu`). A block's body is cut at
its barriers into regions, and each region becomes a loop over the block's
threads (in a given order, forward or reverse), so a barrier's semantics are
exact: every thread finishes the region before any thread starts the next.
Register values used in more than one region are kept per thread across the
barrier; the others stay local to the loop, where the host compiler keeps
them in registers. The device functions are the same text for both.

A `fuse.loop` becomes a `for` loop with a constant trip count (not unrolled; the
compilers may unroll it by a small factor). On the CPU, a loop without a barrier
inside stays within its region, each thread running all its iterations; a loop
with barriers runs at the block level, its body's regions each a loop over the
threads, and register values used in such a body are kept per thread.
A `fuse.copy` is run by the threads `kernel.model.copy_pattern` names, each
copying the words it holds.

Uniform inputs (`uniform(...)` of a kernel) are copied once per block into a small
shared array of their own, right after the kernel's first loads are issued when a
planned barrier follows those loads (else first, with a barrier of their own), and
every element reads its words there. A `fuse.store ... reduce` stages the block's elements of the value in a
shared array of its own and combines them by a fixed tree (halving the elements at
each step, a barrier after each: `__syncwarp` once a step's words fit the first warp,
whose threads alone take part in it and in every later step), then writes word k of the
block's partial at k * blocks + block. For a scalar, the first step reads the value where
it is in shared memory (no staging copy first), and on the GPU the steps within the first
warp run on its registers with `__shfl_down_sync` (lane t taking lane t + s: the same
pairs in the same order; the CPU twin keeps the shared steps, `GpuOnly`). Where each thread
runs several elements and a value is in registers, the steps whose pairs are one thread's
own elements run on a copy of its rows first (`tree_on_rows`), again the same pairs in order.
`combine_emit.combine_kernel` combines those partials: 8192 lanes per word, each a fixed stride of
them, then a fixed tree over the lanes (on the GPU eight blocks per word, a thread block
cluster from sm_90 whose first block reads the others' lanes from their shared memory;
the tree's last five steps on one warp): the same partials give the same bits on the GPU
and on the CPU, run after run. Neither uses atomics.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from importlib import resources
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from irfuse.analysis.access_patterns import read_shift
from irfuse.analysis.placements import Placements
from irfuse.analysis.shared_accesses import WARP, tree_half, tree_reads_in_place
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import group_elements, slot_bytes, slot_ctype
from irfuse.backend.combine_emit import combine_kernel, finish_in_last_block
from irfuse.backend.scatter_emit import (index_check_kernel, scatter_atomic_kernel, scatter_groups_kernel,
                                         scatter_kernel, transpose_kernels, trips_ahead, zero_kernel)
from irfuse.backend.kernel_body import (BARRIER, COMBINE, STATIC_SHARED_LIMIT, WARP_BARRIER, GpuOnly, KernelBody,
                                        LoopNode)
from irfuse.backend.render_cpu import cpu_kernel
from irfuse.backend.render_gpu import gpu_kernel
from irfuse.diagnostics import CompileError
from irfuse.dialects import fuse, kas
from irfuse.dialects.access_pattern import AccessPattern, compile_start
from irfuse.dialects.element_types import ElementType
from irfuse.dialects.kas import ProgramOp
from irfuse.dialects.layouts import OUTPUT_PREFIX, module_strides
from irfuse.kernel.bridge import literal_arguments, model_from_kernel
from irfuse.kernel.model import Patterns, copy_pattern
from irfuse.kernel.policies import default_min_blocks, launch_min_blocks, row_vector, staged_run_loads
from irfuse.library.catalogue import Library, find_implementation
from irfuse.library.implementations import Implementation

PRELUDE_HEADER = "irfuse_prelude.h"  # the helpers every generated source starts with, beside irfuse_host.h


def prelude() -> str:
    """The text generated sources start with (`irfuse_prelude.h`, read once)."""
    global _PRELUDE
    if _PRELUDE is None:
        _PRELUDE = resources.files("irfuse.backend").joinpath(PRELUDE_HEADER).read_text()
    return _PRELUDE


_PRELUDE: str | None = None

@record
class EmittedModule:
    """A module's CUDA C (`source`: every kernel, what the host C++ compiler builds and a plan's
    `kernels.cu` holds) and its kernels; `units`: the same kernels cut into sources NVRTC
    compiles apart (`emit_module`), each an `EmittedModule` of its own."""

    source: str
    kernels: list[KernelInfo]
    units: tuple = ()


class _Names:
    """C identifiers for the SSA values of one kernel."""

    def __init__(self) -> None:
        self.names: dict[SSAValue, str] = {}
        self.used: set[str] = set()
        # The first suffix still to try for each base: every one below it is taken, and names
        # are never given back, so the search goes on from there (from 1 every time, a chain of
        # thousands of values of one variable took time quadratic in their number).
        self.next: dict[str, int] = {}

    def get(self, v: SSAValue, prefix: str) -> str:
        if v not in self.names:
            base = prefix + "".join(c if c.isalnum() else "_" for c in (v.name_hint or "v"))
            name, k = base, self.next.get(base, 1)
            if name in self.used:
                name = f"{base}_{k}"
                while name in self.used:
                    k += 1
                    name = f"{base}_{k}"
                self.next[base] = k + 1
            self.used.add(name)
            self.names[v] = name
        return self.names[v]


def shared_words(kernel: fuse.KernelOp, library: Library | None = None) -> int:
    """Words of shared memory the kernel's places need (0 if all values are in registers)."""
    return model_from_kernel(kernel, library=library)[0].shared_words()


def c_start(ap: AccessPattern, bx: int) -> str:
    """An AP start expression as C text inside a kernel or device function."""
    if re.search(r"\bBY\b", ap.start):
        raise CompileError(f"access-pattern start '{ap.start}': BY is not available in generated code")
    return re.sub(r"\bBX\b", str(bx), ap.start)


def call_impl(op: fuse.CallOp, library: Library | None = None) -> Implementation:
    return find_implementation(op.op_name, op.impl.data, library)


def variant_of(op: fuse.CallOp) -> str:
    """One letter per operand and the result: 's' shared, 'r' registers, 'u' the block's copy
    of a uniform input."""
    def letter(v: SSAValue) -> str:
        place = fuse.place_of(v)
        assert place is not None
        return "s" if place.is_shared else "u" if place.is_uniform else "r"
    return "".join(letter(a) for a in op.args) + ("s" if op.get_place().is_shared else "r")


def thread_scope(bx_call: int, bx_kernel: int, remap: bool) -> tuple[str, str, str]:
    """(prefix, x, y): C to open a scope where a call's thread coordinates are x, y, and its guard."""
    if remap:
        return (f"{{ const int tx_c = tid % {bx_call}, ty_c = tid / {bx_call}; ", "tx_c", "ty_c")
    return ("{ ", "tx", "ty")


def element_major(ap: AccessPattern, bx: int, by: int, size: int) -> bool:
    """Whether the AP's start is `ty*size` plus a part without ty: element ty's words start
    `size` words after element ty - 1's, for every thread of an element."""
    start = compile_start(ap.start)
    return all(start(tx, ty, bx, by) - start(tx, 0, bx, by) == ty * size
               for tx in range(bx) for ty in range(1, min(by, 4)))


def _check_element_major(ap: AccessPattern, bx: int, by: int, size: int) -> None:
    """A register value's words are found in a structure of arrays from the word a thread
    starts at within its element: the AP's start must be element-major (`element_major`)."""
    if not element_major(ap, bx, by, size):
        raise CompileError(f"access-pattern start '{ap.start}' does not place element ty at ty*{size}: "
                           "its words cannot be found in a structure-of-arrays batch")


def strided_index(element: str, word: str, strides: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """The index in a strided view (`strides` in words, batch axis first) of word `word` (a C
    expression: the word's position in the value, row-major) of element `element`."""
    terms = [f"(long long)({element}) * {strides[0]}"]
    inner = 1
    for dim, stride in reversed(list(zip(shape, strides[1:]))):
        if stride:
            axis = f"({word})" if inner == 1 else f"(({word}) / {inner})"
            terms.append(f"(long long)({axis} % {dim}) * {stride}" if dim * inner < math.prod(shape)
                         else f"(long long){axis} * {stride}")
        inner *= dim
    return " + ".join(terms)


def strided_arguments(module: ModuleOp) -> dict[str, dict[int, tuple[int, ...]]]:
    """Kernel name -> {global argument position: strides} for the program inputs and outputs
    the module's `kas.strides` names, as the host program binds them to its launches."""
    strides = module_strides(module)
    if not strides:
        return {}
    program = next((op for op in module.ops if isinstance(op, ProgramOp)), None)
    if program is None:
        return {}
    def top_level_launch(op) -> bool:
        return isinstance(op, fuse.LaunchOp) and op.parent_op() is program

    # The host values that live in a strided view: inputs, and returned values (which the
    # launches after the one that writes them read from the same view).
    by_value = {arg: strides[name] for arg, name in zip(program.body.block.args, program.inputs) if name in strides}
    for arg, name in zip(program.body.block.args, program.inputs):
        if arg in by_value and not all(top_level_launch(u.operation) for u in arg.uses):
            raise CompileError(f"input '{name}' is read by a loop run from the host, which takes contiguous arrays: "
                               "a strided view cannot be given for it")
    for v, name in zip(program.return_op.operands, program.outputs):
        if OUTPUT_PREFIX + name not in strides:
            continue
        if not top_level_launch(v.owner):
            raise CompileError(f"output '{name}' is not written by a kernel (an input returned as it is, or the "
                               "result of a loop run from the host): a strided view cannot be given for it")
        if by_value.get(v, strides[OUTPUT_PREFIX + name]) != strides[OUTPUT_PREFIX + name]:
            raise CompileError(f"output '{name}' is returned twice with different strides")
        by_value[v] = strides[OUTPUT_PREFIX + name]
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for op in program.walk():
        if not isinstance(op, fuse.LaunchOp):
            continue
        values = [*op.args, *op.res]
        bound = {i: by_value[v] for i, v in enumerate(values) if v in by_value}
        if not bound:
            continue
        name = op.kernel_name
        if name in out or not isinstance(op.parent_op(), ProgramOp):
            raise CompileError(f"kernel @{name} reads or writes a strided argument and is launched more than once "
                               "(a loop on the host): such programs take contiguous arrays")
        out[name] = bound
    return out


def c_literal(number: float) -> str:
    """`number` (finite) as a literal of the element type, rounded as the host rounds the
    constant's word (to nearest): a hexadecimal double, exact, cast."""
    return f"(real_t){number.hex()}"


# Bytes of shared memory a block may take with its scatter order staged (`emit_scatter_rows`):
# a block's most; above it the order is read from global memory where it lies (tests lower it).
STAGED_ORDER_LIMIT = fuse.MAX_SHARED_BYTES_PER_BLOCK
assert STAGED_ORDER_LIMIT < 4 << 16  # (so a staged member's row place, in words, fits 16 bits)


def partial_sum(at: Callable[[str], str], dst: str, row: int,
                slot: Callable[[str], str] = lambda q: f"irf_b + irf_m[{q}]") -> list[str]:
    """The statements adding partial `irf_p` of a scatter's rows and writing it to `dst`: the
    rows of its slots (members `irf_m0` to `irf_m1 - 1`, `slot(q)` the q-th one's slot: by
    default group-local `irf_m[q]` past the group's first slot `irf_b`) in slot order from
    its first row, `at(slot)` word `irf_c` of a slot's row: the one order the GPU kernel and
    the CPU loop both add in. (The GPU's staged order gives `slot` a member's row's place in
    shared memory and `at` reads there.)"""
    each = f"for (int irf_c = 0; irf_c < {row}; ++irf_c)"
    return [f"real_t irf_acc[{row}];",
            f"{each} irf_acc[irf_c] = {at(slot('irf_m0'))};",
            "for (int irf_q = irf_m0 + 1; irf_q < irf_m1; ++irf_q) {",
            f"  {each} irf_acc[irf_c] += {at(slot('irf_q'))};",
            "}",
            f"{each} {dst}[irf_p * {row} + irf_c] = irf_acc[irf_c];"]


def gather_index(gather: tuple[str, int, int], element: str, word: str) -> str:
    """The index in a nodal array of `word` of `element`'s gathered value: (connectivity's C
    name, K nodes per element, D words per node)."""
    conn, count, width = gather
    row = f"(long long){conn}[({element}) * {count} + ({word}) / {width}]"
    return f"{row} * {width} + ({word}) % {width}" if width > 1 else row


def _vector_ok(by: int, size: int, offset: int, itemsize: int) -> bool:
    """16-byte copies need the block's chunk in global and shared memory 16-byte aligned."""
    per = 16 // itemsize
    return (by * size) % per == 0 and offset % per == 0


# What a renderer of kernels as something other than the GPU's kernel overrides of
# `KernelEmitter` (the CPU's loop over elements, `render_cpu_loop.ElementLoopEmitter`): the
# walk (`emit_ops`, `describe`) stays the emitter's, each op's statements and how a value is
# addressed are the renderer's. `tests/test_backend_cpu.py` holds the loop renderer to it.
RENDERER_HOOKS = frozenset({
    # how a value's words are addressed: the element's row, registers, the element a statement runs
    "base", "element", "each_element", "reg_ref", "declare_register", "rows_combinable",
    # what a call runs (a device function, or a form hoisted out of the loop)
    "callee",
    # each op's statements
    "emit_load", "emit_gather", "emit_call", "emit_copy", "emit_row_store", "emit_scatter_rows", "emit_reduce",
    "emit_barrier",
    # what surrounds the body: uniform inputs' copies, a reduction finished by the last block
    "stage_uniform_inputs", "finish_in_last_block",
})


class KernelEmitter:
    """The CUDA C of one `fuse.kernel`: declarations, then one statement group per op (the
    walk, `emit_ops`), into a `KernelBody` (`describe`) that a renderer writes out
    (`render_gpu`, `render_cpu`). Another rendering of the same walk overrides the methods
    named in `RENDERER_HOOKS` and nothing else."""

    def __init__(self, kernel: fuse.KernelOp, itemsize: int, min_blocks: int | None, library: Library | None = None,
                 strided: dict[int, tuple[int, ...]] | None = None, constants: dict[int, float | tuple[float, ...]] | None = None):
        self.kernel = kernel
        # Uniform inputs (by position) that every launch gives the same literal.
        self.constants = constants or {}
        self.constant_arrays: list[tuple[str, str]] = []
        self.tables: list[tuple[str, list[str]]] = []  # uniform inputs fixed when compiling: name, literals
        # Global arguments (by position: inputs, then outputs) that are strided views.
        args = (*kernel.input_args, *kernel.output_args)
        self.strided: dict[SSAValue, tuple[int, ...]] = {args[i]: s for i, s in (strided or {}).items()}
        self.library = library
        self.itemsize = itemsize
        self.bx, self.by = kernel.bx.data, kernel.by.data
        self.elements_per_thread = kernel.per_thread
        self.rows = self.by // self.elements_per_thread  # thread rows: element y runs on row y % rows
        self.nthreads = self.bx * self.rows
        self.names = _Names()
        self.model, mapping = model_from_kernel(kernel, itemsize, library)
        # (every value's register pattern from one walk of the ops: asked of each value, a walk
        # each was quadratic in the kernel's ops, 15 s of a 2,000-call program's emission)
        self.patterns = Patterns(self.model)
        self.min_blocks = min_blocks or launch_min_blocks(self.model)
        self.vids: dict[SSAValue, int] = mapping["ids"]
        # Stored values built in place (`analysis.placements`): the calls that only move words
        # run nowhere, and each call making a part writes it where it goes.
        self.placed = Placements(self.model)
        self.ssa_of = {vid: v for v, vid in reversed(list(self.vids.items()))}
        self.mops = {id(mapping["ops"][m.origin]): m for m in self.model.ops if m.origin >= 0}
        # Register loads staged through shared memory on the GPU, all or none (a strided view's
        # words are not runs), and the reads of their words once the leading loads are issued.
        staged = [mapping["ops"][self.model.ops[i].origin] for i in staged_run_loads(self.model)]
        self.staged_ops = ({id(op) for op in staged} if not any(op.source in self.strided for op in staged)
                           else set())
        self.staged_sources: list[str] = []  # their global arrays' C names
        self.staged_arrays: set[str] = set()  # their shared arrays (the CPU twin has none)
        self.staged_reads: list[str] = []
        self.rep: dict[int, SSAValue] = {}  # one C name per model value (a carried value has several SSA values)
        self.declared: set[int] = set()
        self.loops = 0
        self.in_guarded_loop = False  # emitting the body of a loop only present elements' threads run
        self.words = self.model.shared_words()
        # Inputs (by position) read as a scatter's sums (`emit_sums_kernel`), each with the C
        # names of its scatter order's node offsets and partial numbers.
        self.sums: dict[SSAValue, tuple[str, str]] = {}
        self.pending_sums: list[str] = []  # their statements, after the leading loads are issued
        self.info = KernelInfo(kernel.sym_name.data, self.bx, self.by, self.words,
                               [a.name_hint or f"in{i}" for i, a in enumerate(kernel.input_args)],
                               [a.name_hint or f"out{i}" for i, a in enumerate(kernel.output_args)],
                               [a.type.size for a in kernel.input_args],  # type: ignore[attr-defined]
                               [a.type.size for a in kernel.output_args])  # type: ignore[attr-defined]
        self.info.min_blocks = self.min_blocks
        self.info.per_thread = self.elements_per_thread
        if any(isinstance(a.type, kas.IndexType) for a in kernel.input_args):
            self.info.input_types = ["int" if isinstance(a.type, kas.IndexType) else "" for a in kernel.input_args]
        if kernel.barriers_before is not None:
            self.info.barriers_before = kernel.barriers_before.data
        # The body: lists of statements, barriers and loops (`LoopNode`), nested as the kernel's ops.
        self.body: list = []
        self.open: list[list] = [self.body]
        self.regs: list[tuple[str, int]] = []  # register values: C name, words per thread
        self.reg_words: dict[str, int] = {}  # register values: words per element (a row)
        self.used: set[tuple[Implementation, str]] = set()
        self.pending_async = False  # loads issued with cp.async and not yet waited for
        self.soa = kernel.global_layout == "soa"
        # Shared arrays outside the planned buffer: uniform inputs' block copies, reductions' staging.
        self.block_arrays: list[tuple[str, int]] = []
        self.uniform_copies: dict[SSAValue, str] = {}
        self.pending_uniform: list[str] = []  # lines copying them, not yet emitted
        self.uniform_barrier = False  # whether those lines need a barrier of their own
        self.info.once = kernel.runs_once
        self.info.reduced = [""] * len(kernel.output_args)
        self.info.grouped = [0] * len(kernel.output_args)
        for op in kernel.walk():  # (set before the walk: the group parameters follow the outputs' order)
            if isinstance(op, fuse.StoreOp) and op.scatters:
                self.info.grouped[list(kernel.output_args).index(op.dest)] = tuple(op.value.type.shape)[0]
        self.finishes: list[tuple[int, str, str, int]] = []  # reductions: (output, partials' C name, kind, words)

    def base(self, v: SSAValue, y: str) -> str:
        """The pointer a device function indexes for value v, run as element y: a padded
        value's element y is moved by y*(pitch - size) words (see analysis.bank_conflicts)."""
        place = fuse.place_of(v)
        assert place is not None
        if place.is_uniform:
            return self.uniform_copies[v.owner.source]  # type: ignore[union-attr]
        if not place.is_shared:
            return self.reg_ref(v)
        extra = place.pitch.data - v.type.size if place.pitch.data else 0  # type: ignore[attr-defined]
        return f"smem + {place.offset.data}" + (f" + {y}*{extra}" if extra else "")

    def operand(self, v: SSAValue, read: AccessPattern, bx: int, y: str) -> str:
        """The pointer a call reading value v through pattern `read` indexes: `base`, where v
        is in registers moved on to where the reader's words start in the thread's array
        (`access_patterns.read_shift`: a reader taking words past the first that the value's
        producer writes, as `item_1_3x3` takes a matrix's second row)."""
        place = fuse.place_of(v)
        if place is None or place.is_shared or place.is_uniform:
            return self.base(v, y)
        shift = read_shift(self.pattern(v)[0], read, bx, self.by)
        if shift is None:
            raise CompileError(f"kernel @{self.info.name}: a call reads register value {self.reg_name(v)} through "
                               f"{read.text()}, not within what its threads hold")
        return self.base(v, y) if shift == 0 else f"({self.base(v, y)} + {shift})"

    def reg_name(self, v: SSAValue) -> str:
        return self.names.get(self.rep.setdefault(self.vids[v], v), "r_")

    def reg_ref(self, v: SSAValue) -> str:
        """The words of register value v for the element a statement runs: the thread's
        array, or its row `irf_e` where each thread runs several elements."""
        name = self.reg_name(v)
        return name if self.elements_per_thread == 1 else f"({name} + irf_e * {self.reg_words[name]})"

    def element(self, y: str) -> str:
        """The C name of a statement's element within the block: `y` (from `thread_scope`),
        or `irf_y`, the loop variable of `each_element`."""
        return y if self.elements_per_thread == 1 else "irf_y"

    def each_element(self, statement: str) -> str:
        """`statement` (guarded) for each element the thread runs: itself with one element a
        thread, else in a loop over elements ty, ty + rows, ... (`irf_e`-th: `irf_y`)."""
        if self.elements_per_thread == 1:
            return statement
        return (f"IRF_UNROLL for (int irf_e = 0; irf_e < {self.elements_per_thread}; ++irf_e) "
                f"{{ const int irf_y = ty + irf_e * {self.rows}; {statement} }}")

    def pattern(self, v: SSAValue) -> tuple[AccessPattern, int, bool]:
        """The AP, implementation bx and remapping through which a register value's threads hold it."""
        return self.patterns(self.vids[v])

    def declare_register(self, v: SSAValue) -> None:
        if self.vids[v] in self.declared:
            return  # a carried value: declared where it is first copied into
        self.declared.add(self.vids[v])
        ap, _, _ = self.pattern(v)
        words = max(ap.relative()) + 1
        self.reg_words[self.reg_name(v)] = words
        self.regs.append((self.reg_name(v), words * self.elements_per_thread))
        self.info.register_values += 1

    def guard(self, bx_call: int, y: str, remap: bool) -> str:
        if remap:
            return f"{y} < count"
        present = "active" if self.elements_per_thread == 1 else f"{y} < count"
        return present if bx_call == self.bx else f"{present} && tx < {bx_call}"

    def guarded(self, bx_call: int, y: str, remap: bool, statement: str) -> str:
        """`statement` for the threads of present elements (all of them inside a loop that only
        such threads enter)."""
        if self.in_guarded_loop:
            return statement
        return f"if ({self.guard(bx_call, y, remap)}) {statement}"

    def _whole_threads_only(self, loop: fuse.LoopOp) -> bool:
        """Whether every op of a loop runs on every thread of its element and no barrier is in
        it: then only the threads of present elements need to run the loop at all."""
        for op in loop.body.walk():
            if isinstance(op, fuse.BarrierOp):
                return False
            if isinstance(op, fuse.CallOp) and (op.remapped or call_impl(op, self.library).bx != self.bx):
                return False
            if isinstance(op, fuse.CopyOp):
                _, bx, remap = copy_pattern(self.model, self.mops[id(op)], self.patterns)
                if remap or bx != self.bx:
                    return False
        return True

    def per_thread(self, v: SSAValue, statement: Callable[[str, str, str], str], global_value: SSAValue | None,
                   gather: tuple[str, int, int] | None = None,
                   row: Callable[[str, str], str] | None = None) -> str:
        """A statement run by each thread holding its part of register value v, given the
        global index (in `global_value`) of word k of the thread's element, the register array
        and k. `gather`: (C name of the connectivity, K, D): word k is in the row of the node
        its element's entry k // D names (`gather_index`). `row`: for a thread holding its
        element's whole row of an array-of-structures batch, the statement given the global
        index of the row's first word and the register array, run instead of one a word."""
        ap, ap_bx, remap = self.pattern(v)
        scope, x, y = thread_scope(ap_bx, self.bx, remap)
        y = self.element(y)
        size = v.type.size  # type: ignore[attr-defined]
        start = c_start(ap, ap_bx).replace("tx", "\0TX").replace("ty", "\0TY")
        if gather is not None:
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            index = lambda k: gather_index(gather, f"first + {y}", f"({word}) + {k}")  # noqa: E731
        elif global_value is None:
            # A reduction's staging array: element y at y*size.
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            index = lambda k: f"{y} * {size} + ({word}) + {k}"  # noqa: E731
        elif global_value in self.strided:
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            strides, shape = self.strided[global_value], v.type.shape  # type: ignore[attr-defined]
            index = lambda k: strided_index(f"first + {y}", f"({word}) + {k}", strides, shape)  # noqa: E731
        elif self.soa:
            # The AP's start is the element's base (y*size) plus the word the thread starts at.
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            index = lambda k: f"(long long)(({word}) + {k}) * n + first + {y}"  # noqa: E731
        else:
            start = start.replace("\0TX", x).replace("\0TY", y)
            index = lambda k: f"first * {size} + ({start}) + {k}"  # noqa: E731
            if row is not None and sorted(ap.relative()) == list(range(size)):
                body = row(index(0), self.reg_ref(v))
                return f"  {scope}{self.each_element(self.guarded(ap_bx, y, remap, '{ ' + body + ' }'))} }}"
        body = " ".join(statement(index(k), self.reg_ref(v), str(k)) for k in sorted(ap.relative()))
        return f"  {scope}{self.each_element(self.guarded(ap_bx, y, remap, '{ ' + body + ' }'))} }}"

    def copy(self, dst: str, src: str, count: str, size: int, place: fuse.PlaceAttr, load: bool = False) -> str:
        """A block-wide copy between global and shared memory: element-wise for a padded value,
        16 bytes at a time where the block's chunk is aligned (asynchronous for loads)."""
        offset, pitch = place.offset.data, place.pitch.data
        if pitch:
            fn = f"irf_{'load' if load else 'store'}_pitched<{size}, {pitch}>"
            self.pending_async |= load
        else:
            fn = "irf_copy16" if _vector_ok(self.by, size, offset, self.itemsize) else "irf_copy"
            if load and fn == "irf_copy16":
                fn = "irf_load_async16"
                self.pending_async = True
        return f"  {fn}({dst}, {src}, {count}, tid, {self.nthreads});"

    def strided_copy(self, g: SSAValue, type_, place: fuse.PlaceAttr, load: bool) -> str:
        """A block-wide copy between a strided view and a shared value (element e at e*SPAN),
        word by word: consecutive threads take consecutive elements of one word where the
        view's elements lie closer together than an element's words (a structure of arrays),
        else consecutive words of an element."""
        size, shape, strides = type_.size, type_.shape, self.strided[g]
        span, off, name = place.pitch.data or size, place.offset.data, self.names.get(g, "g_")
        word_major = len(strides) > 1 and abs(strides[0]) < min(abs(s) for s in strides[1:])
        split = (f"const int k = irf_i / {self.by}, e = irf_i % {self.by}; if (e >= count) continue;" if word_major
                 else f"const int e = irf_i / {size}, k = irf_i % {size};")
        bound = f"{size * self.by}" if word_major else f"count * {size}"
        shared = f"smem[{off} + e * {span} + k]"
        glob = f"{name}[{strided_index('first + e', 'k', strides, shape)}]"
        move = f"{shared} = {glob};" if load else f"{glob} = {shared};"
        return f"  for (int irf_i = tid; irf_i < {bound}; irf_i += {self.nthreads}) {{ {split} {move} }}"

    def soa_copy(self, fn: str, dst: str, src: str, size: int, place: fuse.PlaceAttr) -> str:
        span = place.pitch.data or size
        return f"  irf_{fn}_soa<{size}, {span}, {self.by}>({dst}, {src}, n, count, tid, {self.nthreads});"

    def stage_uniform_inputs(self) -> None:
        """Copies each uniform input into a shared array of its own, once per block, after the
        kernel's first loads are issued (`flush_uniform_copies`): the block asks for its
        elements first, and the copies' latency overlaps theirs (ahead of the loads, every
        block waited for its uniform words before asking for anything). Where those loads are
        followed by a planned barrier, that one covers the copies; where they all go to
        registers, the copies get a barrier of their own after them."""
        lines = []
        for i in self.kernel.uniform_positions:
            g = self.kernel.input_args[i]
            size = g.type.size  # type: ignore[attr-defined]
            if isinstance(self.constants.get(i), tuple) and len(self.constants[i]) == size:
                # (a table fixed when compiling: a constant array of the module, no copy; on the
                # GPU in the constant bank, which the arithmetic reads as operands)
                name = f"irf_t_{self.kernel.sym_name.data}_{len(self.tables)}"
                self.uniform_copies[g] = name
                self.tables.append((name, [c_literal(v) for v in self.constants[i]]))
                continue
            if i in self.constants and size == 1:
                # (a literal: no copy, and the C compiler folds it where it is read)
                name = f"irf_c{len(self.constant_arrays)}"
                self.uniform_copies[g] = name
                self.constant_arrays.append((name, c_literal(self.constants[i])))
                continue
            name = f"irf_u{len(self.uniform_copies)}"
            self.uniform_copies[g] = name
            self.block_arrays.append((name, size))
            src = self.names.get(g, "g_")
            # (a word a thread where the block has as many: a loop compiles to unrolled code
            # that every thread steps through, some tens of instructions an input)
            copy = (f"if (tid < {size}) {name}[tid] = {src}[tid];" if size <= self.nthreads else
                    f"for (int irf_i = tid; irf_i < {size}; irf_i += {self.nthreads}) {name}[irf_i] = {src}[irf_i];")
            lines += [f"  // {name}: the block's copy of uniform input {g.name_hint or src}", f"  {copy}"]
        ops = self.kernel.body.block.ops
        first = next((op for op in ops if not isinstance(op, fuse.LoadOp)), None)
        leading = list(itertools.takewhile(lambda op: isinstance(op, fuse.LoadOp), ops))
        if isinstance(first, fuse.BarrierOp) or not any(op.place.is_shared for op in leading):
            self.pending_uniform = lines
            self.uniform_barrier = bool(lines) and not isinstance(first, fuse.BarrierOp)
            return
        # (loads into shared memory with no barrier after them race: the barrier of the copies
        # is not moved where it would hide that from the CPU backend's tests)
        for text in lines:
            self.line(text)
        if lines:
            self.open[-1].append(BARRIER)

    def flush_uniform_copies(self) -> None:
        """The deferred uniform copies, where the loads before the first barrier are issued."""
        for text in self.pending_uniform:
            self.line(text)
        self.pending_uniform = []
        if self.uniform_barrier:
            self.open[-1].append(BARRIER)

    def emit_load(self, op: fuse.LoadOp) -> None:
        if op.place.is_uniform:  # (the verifier keeps every uniform input there)
            source = op.source.name_hint or self.names.get(op.source, "g_")
            self.line(f"  // {self.names.get(op.res, 'v_')}: uniform {source}, read from "
                      f"{self.uniform_copies[op.source]} by every element")
            return
        size = op.res.type.size
        src = self.names.get(op.source, "g_")
        if op.index is not None:
            self.emit_gather(op, src)
            return
        if op.source in self.sums:
            self.emit_sums(op, src)
            return
        self.line(f"  // {self.names.get(op.res, 'v_')}: load {op.source.name_hint} into {op.place.text()}")
        if op.place.is_shared:
            off = op.place.offset.data
            if op.source in self.strided:
                self.line(self.strided_copy(op.source, op.res.type, op.place, load=True))  # type: ignore[arg-type]
            elif self.soa:
                self.line(self.soa_copy("load", f"smem + {off}", f"{src} + first", size, op.place))
                self.pending_async = True
            else:
                self.line(self.copy(f"smem + {off}", f"{src} + first * {size}", f"count * {size}", size,
                                    op.place, load=True))
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
            vector = row_vector(size, self.itemsize)
            row = (lambda index, r: f"irf_load_row<{size}, {vector}>({r}, {src} + ({index}));") if vector > 1 else None
            direct = self.per_thread(op.res, lambda index, r, k: f"{r}[{k}] = {src}[{index}];", op.source, row=row)
            if id(op) in self.staged_ops:
                self.stage_runs(op, src, direct)
            else:
                self.line(direct)

    def emit_gather(self, op: fuse.LoadOp, src: str) -> None:
        """`fuse.load ... gather`: word w of element e is word w % D of node conn[e][w / D] of
        the nodal input (rows of D words, K per element). Each element's words are read by its
        own threads (its row of the block: tx, tx + bx, ...), into shared memory or registers
        as the planner placed the value: a thread's loads are independent of one another and
        its node numbers are read once (measured on an H200: 0.50 ms for the P1 residual's
        element kernel where the block taking the words in turn, as a plain load's copy does,
        took 0.80 ms). Every node number was checked against the nodal arrays when the call
        bound its arguments, so the reads need no guard of their own."""
        size = op.res.type.size  # type: ignore[attr-defined]
        gather = (self.names.get(op.index, "g_"), op.index.type.count.data, op.source.type.size)  # type: ignore
        self.line(f"  // {self.names.get(op.res, 'v_')}: gather {op.source.name_hint} through {op.index.name_hint} "
                  f"into {op.place.text()}")
        if op.place.is_shared:
            span, off = op.place.pitch.data or size, op.place.offset.data
            y = self.element("ty")
            words = f"for (int w = 0; w < {size}; ++w)" if self.bx == 1 else f"for (int w = tx; w < {size}; w += {self.bx})"
            statement = (f"{{ IRF_UNROLL {words} smem[{off} + {y} * {span} + w] = "
                         f"{src}[{gather_index(gather, f'first + {y}', 'w')}]; }}")
            self.line(f"  {{ {self.each_element(self.guarded(self.bx, y, False, statement))} }}")
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
            self.line(self.per_thread(op.res, lambda index, r, k: f"{r}[{k}] = {src}[{index}];", op.source, gather))

    def emit_sums(self, op: fuse.LoadOp, src: str) -> None:
        """A load of an input that is a scatter's sums, made where it is loaded: each element
        (a node) adds its partials (`src`, rows of the element kernel's groups) in the scatter
        order (`starts`, `slots`: `mesh.inverse_connectivity`) onto 0, the additions of
        `scatter_emit.scatter_kernel` in its order, so the same bits, into shared memory or
        the element's registers as the planner placed the value. Each thread adds its own
        elements' partials (a row of threads an element, `bx` 1: `emit_sums_kernel` is asked
        only so)."""
        size = op.res.type.size  # type: ignore[attr-defined]
        starts, slots = self.sums[op.source]
        y = self.element("ty")
        if op.place.is_shared:
            span, off = op.place.pitch.data or size, op.place.offset.data
            store = (f"IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) "
                     f"smem[{off} + {y} * {span} + irf_w] = irf_acc[irf_w];")
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
            ap, ap_bx, remap = self.pattern(op.res)
            if remap or ap_bx != 1:
                raise CompileError(f"kernel @{self.info.name}: the scatter's sums {op.source.name_hint} are read "
                                   "one thread an element")
            held, reg = sorted(ap.relative()), self.reg_ref(op.res)
            if held != list(range(size)):
                # Its readers take some of its words (`item_1_3`, `zeros_3`): each node's sums
                # are still added whole, in order, and the thread keeps the words it holds.
                _check_element_major(ap, ap_bx, self.by, size)
                word = c_start(ap, ap_bx).replace("tx", "0").replace("ty", "0")
                store = " ".join(f"{reg}[{k}] = irf_acc[({word}) + {k}];" for k in held)
            else:
                store = f"IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) {reg}[irf_w] = irf_acc[irf_w];"
        # (after the kernel's other leading loads are issued: their latency overlaps the sums')
        self.pending_sums.append(f"  // {self.names.get(op.res, 'v_')}: the scatter's sums {op.source.name_hint} "
                                 f"into {op.place.text()}: each node's partials added in the scatter order")
        # (the rows of `ahead` partials loaded before they are added, in order: the adding
        # kernel's form, `scatter_emit.scatter_kernel`)
        ahead = trips_ahead(size)
        statement = ("{ " + f"real_t irf_acc[{size}]; IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) "
                     "irf_acc[irf_w] = 0; "
                     f"const long long irf_end = {starts}[first + {y} + 1]; "
                     f"for (long long irf_j = {starts}[first + {y}]; irf_j < irf_end; irf_j += {ahead}) {{ "
                     f"real_t irf_rows[{ahead}][{size}]; "
                     f"IRF_UNROLL for (int irf_u = 0; irf_u < {ahead}; ++irf_u) {{ if (irf_j + irf_u < irf_end) {{ "
                     f"const real_t* const irf_row = {src} + (long long){slots}[irf_j + irf_u] * {size}; "
                     f"IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) irf_rows[irf_u][irf_w] = irf_row[irf_w]; }} "
                     f"else {{ IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) irf_rows[irf_u][irf_w] = 0; }} }} "
                     f"IRF_UNROLL for (int irf_u = 0; irf_u < {ahead}; ++irf_u) if (irf_j + irf_u < irf_end) {{ "
                     f"IRF_UNROLL for (int irf_w = 0; irf_w < {size}; ++irf_w) irf_acc[irf_w] += irf_rows[irf_u][irf_w]; }} }} "
                     f"{store} }}")
        self.pending_sums.append(f"  {{ {self.each_element(self.guarded(self.bx, y, False, statement))} }}")

    def stage_runs(self, op: fuse.LoadOp, src: str, direct: str) -> None:
        """A register load staged through a shared array of its own (`staged_run_loads`): on the
        GPU the block copies the value's runs when they are whole and aligned (`irf_runs16`),
        each thread reading its words after the leading loads (`finish_staged_loads`); else,
        and on the CPU, each thread loads its words directly."""
        size = op.res.type.size  # type: ignore[attr-defined]
        name = f"irf_s{len(self.staged_reads)}"
        self.block_arrays.append((name, self.by * size))
        self.staged_arrays.add(name)
        self.staged_sources.append(src)
        reg = self.reg_ref(op.res)
        self.staged_reads.append(" ".join(f"{reg}[{k}] = {name}[{k * self.by} + ty];" for k in range(size)))
        gpu = [f"  // staged: its {size} runs through {name} where whole and aligned",
               f"  if (irf_runs16) irf_load_runs16<{size}, {self.by}>({name}, {src} + first, n, tid, {self.nthreads});",
               f"  else{direct[1:]}"]
        self.open[-1].append(GpuOnly(gpu, [[direct]]))

    def finish_staged_loads(self) -> None:
        """Each thread's words of the staged loads, once the block's copies have landed (GPU only)."""
        reads = " ".join(self.staged_reads)
        self.open[-1].append(GpuOnly([f"  if (irf_runs16) {{ irf_async_wait(); __syncthreads(); if (active) {{ {reads} }} }}"], []))
        self.staged_reads = []

    def emit_call(self, op: fuse.CallOp) -> None:
        mop = self.mops[id(op)]
        if self.placed.is_moved(mop):
            self.line(f"  // {op.op_name}: its words written where they were made (a stored value built in place)")
            return
        impl = call_impl(op, self.library)
        variant = variant_of(op)
        self.used.add((impl, variant))
        if op.place.is_shared:
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
        remap = op.remapped
        for k, a in enumerate(op.args):
            if variant[k] == "u":  # read at the AP's start within one element
                _check_element_major(impl.operand_aps[k], impl.bx, self.by, a.type.size)  # type: ignore[attr-defined]
        scope, x, y = thread_scope(impl.bx, self.bx, remap)
        y = self.element(y)
        args = [x, y] + [self.operand(a, impl.operand_aps[k], impl.bx, y) for k, a in enumerate(op.args)] + [
            self.base(op.res, y)]
        self.line(f"  // {op.op_name}[{impl.name}] into {op.place.text()}"
                         + (", threads remapped" if remap else ""))
        name, leading = self.callee(op, impl, variant)
        call = self.guarded(impl.bx, y, remap, f"{name}({', '.join(leading + args)});")
        self.line(f"  {scope}{call} }}" if remap else f"  {self.each_element(call)}")
        self.info.calls.append(f"{op.op_name}[{impl.name}]")
        for vid, pairs in self.placed.leaf_writes(mop):
            self.emit_part_writes(op.res, self.ssa_of[vid], pairs)

    def emit_part_writes(self, part: SSAValue, value: SSAValue, pairs: tuple[tuple[int, int], ...]) -> None:
        """A part's words written into the stored value built of it, where they go
        (`analysis.placements`), by the thread of each element (one an element)."""
        y = self.element("ty")
        size = value.type.size  # type: ignore[attr-defined]
        body = " ".join(f"({self.base(value, y)})[({y}) * {size} + {t}] = {self.reg_ref(part)}[{w}];" for w, t in pairs)
        self.line(f"  // {self.names.get(part, 'v_')}: written into {self.names.get(value, 'v_')} where it goes")
        self.line(f"  {self.each_element(self.guarded(1, y, False, '{ ' + body + ' }'))}")

    def callee(self, op: fuse.CallOp, impl: Implementation, variant: str) -> tuple[str, list[str]]:
        """The function a call runs and the arguments it takes before the thread's coordinates:
        the implementation's variant, none (the CPU loop renderer hands some calls to a form of
        its own)."""
        return impl.variant_name(variant), []

    def emit_copy(self, op: fuse.CopyOp) -> None:
        ap, bx, remap = copy_pattern(self.model, self.mops[id(op)], self.patterns)
        if op.place.is_shared:
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
        scope, x, y = thread_scope(bx, self.bx, remap)
        y = self.element(y)
        start = c_start(ap, bx).replace("tx", "\0TX").replace("ty", "\0TY").replace("\0TX", x).replace("\0TY", y)

        if fuse.place_of(op.source).is_uniform:  # type: ignore[union-attr]
            raise CompileError(f"kernel @{self.info.name}: a fuse.copy of the uniform value "
                               f"{op.source.name_hint}: read it where it is")

        def word(v: SSAValue, k: int) -> str:
            place = fuse.place_of(v)
            return f"{self.reg_ref(v)}[{k}]" if not place.is_shared else f"({self.base(v, y)})[({start}) + {k}]"
        body = " ".join(f"{word(op.res, k)} = {word(op.source, k)};" for k in sorted(ap.relative()))
        self.line(f"  // {self.names.get(op.res, 'v_')}: copy of {op.source.name_hint} into {op.place.text()}")
        self.line(f"  {scope}{self.each_element(self.guarded(bx, y, remap, '{ ' + body + ' }'))} }}")

    def emit_loop(self, op: fuse.LoopOp) -> None:
        var = f"irf_i{self.loops}"
        self.loops += 1
        # A loop that only the threads of present elements need runs under one guard (none
        # inside): a loop of calls each behind its own branch compiles to slower code.
        guard = not self.in_guarded_loop and self._whole_threads_only(op)
        trips = op.trip_count.data
        loop = LoopNode(f"for (int {var} = 0; {var} < {trips}; ++{var}) {{  // fuse.loop", trips,
                        "if (active) " if guard else "")
        self.open[-1].append(loop)
        self.open.append(loop.children)
        self.in_guarded_loop |= guard
        self.emit_ops(op.body.block)
        self.in_guarded_loop &= not guard

    def emit_yield(self, op: fuse.YieldOp) -> None:
        self.open.pop()

    def emit_reduce(self, op: fuse.StoreOp) -> None:
        """The block's partial of a reduction: its elements staged in a shared array, combined
        by a fixed tree, word k written at k * blocks + block (see the module's docstring)."""
        place = fuse.place_of(op.value)
        assert place is not None and op.reduce_kind is not None
        kind = op.reduce_kind.value
        size = op.value.type.size  # type: ignore[attr-defined]
        red = f"irf_red{sum(1 for name, _ in self.block_arrays if name.startswith('irf_red'))}"
        self.block_arrays.append((red, self.by * size))
        nt = self.nthreads
        self.info.reduced[list(self.kernel.output_args).index(op.dest)] = kind
        self.finishes.append((list(self.kernel.output_args).index(op.dest), self.names.get(op.dest, "g_"), kind, size))
        # No barrier first: the planned ones order a shared value's producers before this
        # store (which reads it with any thread), and the staging array is this reduction's own.
        self.line(f"  // {kind} of {op.value.name_hint} over the block's elements into {op.dest.name_hint}'s partials")
        half = tree_half(self.by)
        if place.is_shared and tree_reads_in_place(size, place.pitch.data, self.by):
            # The first step reads the value where it is and writes the staging array: the
            # same operations as copying it there first, one pass and one barrier fewer.
            off = place.offset.data
            both = COMBINE[kind].format(a=f"smem[{off} + irf_i]", b=f"smem[{off + half} + irf_i]")
            self.line(f"  for (int irf_i = tid; irf_i < {half}; irf_i += {nt}) "
                      f"{red}[irf_i] = irf_i + {half} < count ? {both} : smem[{off} + irf_i];")
            half //= 2
        elif place.is_shared:  # as a store copies it out (the staging array is aligned as global chunks are)
            self.line(self.copy(red, f"smem + {place.offset.data}", f"count * {size}", size, place))
        elif self.rows_combinable(op.value, half):
            half = self.tree_on_rows(op.value, red, kind, half)
        else:
            self.line(self.per_thread(op.value, lambda index, r, k: f"{red}[{index}] = {r}[{k}];", None))
        self.open[-1].append(BARRIER)
        # A scalar's last steps (those within the first warp) run on that warp's registers on
        # the GPU, as shuffles: no shared round trip and no barrier per step.
        shuffled = size == 1 and nt >= WARP and self.by > 1
        warp_steps: list = []  # those steps as the CPU runs them
        first_warp_step = 0
        while self.by > 1 and half >= 1:
            step = "  " + tree_step(red, kind, size, half, "count", "tid", nt)
            # Once a step's words fit the first warp, it and every later step (and the write
            # of the partial, `size` words) run on that warp's threads alone: a warp barrier
            # orders them, the same operations in the same order as with block barriers.
            barrier = WARP_BARRIER if half * size <= WARP else BARRIER
            if shuffled and half <= WARP:
                first_warp_step = first_warp_step or half
                warp_steps += [[step], barrier]
            else:
                self.line(step)
                self.open[-1].append(barrier)
            half //= 2
        dst = self.names.get(op.dest, "g_")
        write = "  " + partial_write(dst, red, size, self.by, f"first / {self.by}", "tid", nt)
        if warp_steps:
            self.open[-1].append(GpuOnly(self.warp_tree(red, kind, first_warp_step, f"{dst}[first / {self.by}]"),
                                          [*warp_steps, [write]]))
        else:
            self.line(write)

    def finish_in_last_block(self) -> None:
        """The kernel's end where its last block to finish combines its reductions' partials
        (`combine_emit.finish_in_last_block`; the GPU alone: the CPU runs the combine kernels),
        into the results it takes after its outputs (`irf_fin<j>`, in output order)."""
        assert self.kernel.finish_parts is not None
        staging = "irf_finish"
        self.block_arrays.append((staging, fuse.finish_threads(self.nthreads)))
        reductions = [(parts, f"irf_fin{j}", kind, size)
                      for j, (_, parts, kind, size) in enumerate(sorted(self.finishes))]
        self.open[-1].append(GpuOnly(finish_in_last_block(reductions, self.nthreads, staging), []))
        self.info.finish_parts = self.kernel.finish_parts.data

    def rows_combinable(self, v: SSAValue, half: int) -> bool:
        """Whether the tree's first steps over register value v pair elements of one thread:
        its threads run several elements each, one thread per element holding all its words,
        and the first step's stride is a multiple of the thread rows (then so is every step
        down to the rows: elements i and i + s are thread i % rows's rows a and a + s/rows)."""
        if self.elements_per_thread == 1 or self.bx != 1:
            return False
        ap, ap_bx, remap = self.pattern(v)
        size = v.type.size  # type: ignore[attr-defined]
        return (ap_bx == 1 and not remap and self.reg_words[self.reg_name(v)] == size
                and half >= self.rows and half % self.rows == 0)

    def tree_on_rows(self, v: SSAValue, red: str, kind: str, half: int) -> int:
        """The tree's steps of stride `half` down to the thread rows, on each thread's own
        rows of register value v (a copy: v may be reduced again or read later), the same
        pairs in the same order as in shared memory; then each thread's first row (its
        element ty, combined) staged for the steps left. Returns the next step's stride."""
        size = v.type.size  # type: ignore[attr-defined]
        name, rows, per = self.reg_name(v), self.rows, self.elements_per_thread
        lines = [f"real_t irf_v[{per * size}];",
                 f"for (int irf_j = 0; irf_j < {per * size}; ++irf_j) irf_v[irf_j] = {name}[irf_j];"]
        s = half
        while s >= rows:
            for a in range(s // rows):
                pairs = " ".join(f"irf_v[{a * size + k}] = "
                                 + COMBINE[kind].format(a=f"irf_v[{a * size + k}]", b=f"irf_v[{(a + s // rows) * size + k}]")
                                 + ";" for k in range(size))
                lines.append(f"if (ty + {a * rows + s} < count) {{ {pairs} }}")
            s //= 2
        lines.append(f"if (ty < count) {{ {' '.join(f'{red}[ty * {size} + {k}] = irf_v[{k}];' for k in range(size))} }}")
        self.line("  { // the steps of strides " + f"{half} to {rows} on the thread's own rows")
        for text in lines:
            self.line("    " + text)
        self.line("  }")
        return s

    def warp_tree(self, red: str, kind: str, first: int, dst: str) -> list[str]:
        """A scalar reduction's tree steps from `first` (<= 32) down to 1 and the write of the
        block's partial, on the first warp: lane t holds word t, and a step s combines it
        with lane t + s's where t < s and t + s < count, as the shared steps do."""
        step = COMBINE[kind].format(a="irf_x", b="irf_y")
        return ["  if (tid < 32) {  // the tree's last steps on the first warp's registers",
                f"    real_t irf_x = tid < {self.by} ? {red}[tid] : {red}[0];",
                f"    if (tid < {first} && tid + {first} < count) {{ const real_t irf_y = {red}[tid + {first}]; "
                f"irf_x = {step}; }}",
                *[f"    {{ const real_t irf_y = __shfl_down_sync(0xffffffffu, irf_x, {s}); "
                  f"if (tid < {s} && tid + {s} < count) irf_x = {step}; }}"
                  for s in (first >> k for k in range(1, first.bit_length()))],
                f"    if (tid == 0) {dst} = irf_x;",
                "  }"]

    def group_number(self, op: fuse.StoreOp) -> int:
        """j of a scatter's rows' group parameters (`irf_members{j}`, ...): its output's rank
        among the kernel's grouped outputs, in the outputs' order, which is the order the
        launch passes each one's connectivity in (`KernelInfo.group_params`), whatever the
        order of the stores."""
        at = list(self.kernel.output_args).index(op.dest)
        return sum(1 for g in self.info.grouped[:at] if g)

    def emit_scatter_rows(self, op: fuse.StoreOp) -> None:
        """A scatter's rows summed in the connectivity's groups (`artifact.scatter_groups`):
        the block's rows read where they are in shared memory (a register value's staged in a
        shared array first); one thread a partial of the block's groups adds the rows of its
        slots (`members`, from `firsts`) in slot order and writes it, the threads' partials
        side by side. The block holds whole groups (`fuse.store`'s verifier sees to it).
        Null members (atomics): each row added into its node with atomicAdd where the nodal
        sums are given (GPU), else every row written as it is."""
        place = fuse.place_of(op.value)
        assert place is not None
        size = op.value.type.size  # type: ignore[attr-defined]
        k = tuple(op.value.type.shape)[0]  # type: ignore[attr-defined]
        row, group = size // k, group_elements(k)
        if self.soa or op.dest in self.strided:
            raise CompileError(f"kernel @{self.info.name}: a scatter's rows are an array of structures of irfuse's own")
        j = self.group_number(op)
        dst, nt = self.names.get(op.dest, "g_"), self.nthreads
        self.line(f"  // the rows of {op.value.name_hint} into {op.dest.name_hint}: each group's rows of one node "
                  f"(groups of {group} elements) added in slot order")
        if place.is_shared:
            # Read where they are: the planned barriers order the value's producers before this
            # store (which reads it with any thread), as for a reduction.
            span = place.pitch.data or size
            rows_at = f"smem + {place.offset.data}"
            word = lambda s: f"({s}) / {k} * {span} + ({s}) % {k} * {row}"  # noqa: E731
            whole = f"smem[{place.offset.data} + irf_i / {size} * {span} + irf_i % {size}]"
        else:
            stage = f"irf_sct{j}"
            self.block_arrays.append((stage, self.by * size))
            rows_at = stage
            word = lambda s: f"({s}) * {row}"  # noqa: E731
            whole = f"{stage}[irf_i]"
        at = lambda s: f"({rows_at})[{word(s)} + irf_c]"  # noqa: E731  (slot s's row, word irf_c)
        per_group, bases, members = group * k, f"irf_bases{j}", f"irf_members{j}"
        # The block's stretch of the scatter order (its groups' partial bases, its partials'
        # firsts, and for each member the place of its slot's row among the block's rows)
        # staged in shared memory first, read coalesced and once: read where it lies, each
        # partial's run is two dependent global loads, which at a tangent's occupancy left the
        # threads waiting most of the kernel. A member's row's place is found while staging,
        # each by one thread, not in the partials' loop: there a warp runs as many members as
        # its longest partial has, and the place's arithmetic was half its instructions (the P1
        # residual on 12.6 M tets, Nsight Compute: 36% of the element kernel's warp
        # instructions in that loop). Where the staging would not fit a block beside the
        # rest, the order is read where it lies.
        order = f"irf_ord{j}"
        slot = slot_ctype(k)  # (a slot's number in its group: one byte, or two past 256 slots a group)
        # (a member's row's place in 16 bits: staged, the order and the rows lie in the block's
        # shared memory, at most `STAGED_ORDER_LIMIT` bytes, fewer than 65,536 words)
        place_t, place_bytes = "unsigned short", 2
        order_words = -(-(4 * (self.by // group + 2) + (place_bytes + slot_bytes(k)) * self.by * k)
                        // self.itemsize)
        with_order = dataclasses.replace(self.info, arrays=[words for _, words in self.block_arrays] + [order_words])
        staged = with_order.total_shared_bytes(self.itemsize) <= STAGED_ORDER_LIMIT
        head = [f"    const long long irf_g0 = first / {group};",
                f"    const int irf_groups = (count + {group - 1}) / {group};",
                f"    const long long irf_p0 = {bases}[irf_g0];"]
        if staged:
            self.block_arrays.append((order, order_words))
            head = [f"    int* const irf_sb = (int*){order};  // the groups' first partials, from the block's first",
                    f"    {place_t}* const irf_sm = ({place_t}*)(irf_sb + {self.by // group + 2});  "
                    "// each member's row's place",
                    f"    {slot}* const irf_sf = ({slot}*)(irf_sm + {self.by * k});  // firsts", *head]
            # (a member's slot in the block: its group's first slot and its number in the group,
            # unsigned, so that the place's divisions are shifts where K is a power of two)
            member = f"(unsigned)(irf_i / {per_group} * {per_group}) + (unsigned){members}[first * {k} + irf_i]"
            for text in [
                    f"  if ({members} != nullptr) {{  // the block's scatter order into shared memory",
                    *head,
                    f"    for (int irf_i = tid; irf_i <= irf_groups; irf_i += {nt}) "
                    f"irf_sb[irf_i] = (int)({bases}[irf_g0 + irf_i] - irf_p0);",
                    f"    for (int irf_i = tid; irf_i < count * {k}; irf_i += {nt}) "
                    f"irf_sm[irf_i] = ({place_t})({word(member)});",
                    f"    const int irf_parts = (int)({bases}[irf_g0 + irf_groups] - irf_p0);",
                    f"    for (int irf_i = tid; irf_i < irf_parts; irf_i += {nt}) "
                    f"irf_sf[irf_i] = irf_firsts{j}[irf_p0 + irf_i];",
                    "  }"]:
                self.line(text)

        def base(g: str) -> str:  # group g's first partial, from the block's first
            return f"irf_sb[{g}]" if staged else f"(int)({bases}[irf_g0 + {g}] - irf_p0)"
        group_members = (f"irf_sm + irf_g * {per_group}" if staged else
                         f"{members} + (irf_g0 + irf_g) * {per_group}")
        members_of = place_t if staged else slot  # (staged: the members' rows' places)
        summed = (partial_sum(lambda w: f"({rows_at})[{w} + irf_c]", dst, row, lambda q: f"irf_m[{q}]") if staged
                  else partial_sum(at, dst, row))
        first_of = "irf_sf[{}]" if staged else f"irf_firsts{j}[irf_p0 + {{}}]"
        if not place.is_shared:  # (the rows staged too, before the same barrier)
            self.line(self.per_thread(op.value, lambda index, r, w: f"irf_sct{j}[{index}] = {r}[{w}];", None))
        if staged or not place.is_shared:
            self.open[-1].append(BARRIER)
        # Atomics (null members): on the GPU, given the nodal sums, each row added into its
        # node there, so no second kernel reads the rows back (the scatter="atomic" path's own
        # bytes: 1.2 GB of rows at 12.6 M tetrahedra); else, and on the CPU, whose atomic
        # scatter adds in the fixed order, every row written as it is.
        as_is = (f"    for (int irf_i = tid; irf_i < count * {size}; irf_i += {nt}) "
                 f"{dst}[first * {size} + irf_i] = {whole};")
        node = f"irf_conn{j}[(first + irf_i / {size}) * {k} + irf_i % {size} / {row}]"
        atomic = [f"    if (irf_atomic{j} != nullptr) {{  // each row added into its node",
                  f"      for (int irf_i = tid; irf_i < count * {size}; irf_i += {nt}) "
                  f"atomicAdd(irf_atomic{j} + (long long){node} * {row} + irf_i % {row}, {whole});",
                  "    } else {", "  " + as_is, "    }"]
        self.line(f"  if ({members} == nullptr) {{  // (atomics)")
        self.open[-1].append(GpuOnly(atomic, [[as_is]]))
        # The block's partials dealt to its threads rank by rank across its groups (thread t:
        # group t % G's partial t / G), each group's listed longest first by the connectivity
        # (`artifact.scatter_groups`): a warp runs as many members as its longest partial has,
        # and so its lanes' partials are of like lengths (on a Morton mesh of tets, 34 warp
        # turns a block of 128 elements where the groups' partials side by side in first-slot
        # order took 55; 16 for 512 members at 32 lanes). A thread's partial is one thread's
        # whichever it is: the same sums, the same bits.
        per_block = self.by // group
        for text in [
                "  } else {  // one thread a partial of the block's groups, rank by rank",
                *head,
                "    int irf_most = 0;  // the most partials a group of the block has",
                "    for (int irf_g = 0; irf_g < irf_groups; ++irf_g) {",
                f"      const int irf_here = {base('irf_g + 1')} - {base('irf_g')};",
                "      if (irf_here > irf_most) irf_most = irf_here;",
                "    }",
                f"    for (int irf_t = tid; irf_t < irf_most * {per_block}; irf_t += {nt}) {{",
                f"      const int irf_g = irf_t % {per_block};",
                "      if (irf_g >= irf_groups) continue;",
                f"      const int irf_i = {base('irf_g')} + irf_t / {per_block};",
                f"      if (irf_i >= {base('irf_g + 1')}) continue;",
                "      const long long irf_p = irf_p0 + irf_i;",
                f"      const {members_of}* const irf_m = {group_members};",
                f"      const int irf_b = irf_g * {per_group}, irf_m0 = {first_of.format('irf_i')};",
                f"      const int irf_m1 = irf_i + 1 < {base('irf_g + 1')} ? {first_of.format('irf_i + 1')} : "
                f"count * {k} - irf_b < {per_group} ? count * {k} - irf_b : {per_group};",
                *("      " + line for line in summed),
                "    }",
                "  }"]:
            self.line(text)

    def emit_store(self, op: fuse.StoreOp) -> None:
        """A store: a reduction's partial, a scatter's rows, or the value's words as they are
        (`emit_row_store`)."""
        if op.reduce_kind is not None:
            self.emit_reduce(op)
        elif op.scatters:
            self.emit_scatter_rows(op)
        else:
            self.emit_row_store(op)

    def emit_row_store(self, op: fuse.StoreOp) -> None:
        """A store of a value's words into the elements' rows of a global output."""
        place = fuse.place_of(op.value)
        assert place is not None
        size = op.value.type.size  # type: ignore[attr-defined]
        dst = self.names.get(op.dest, "g_")
        self.line(f"  // store into {op.dest.name_hint}")
        if place.is_shared:
            off = place.offset.data
            if op.dest in self.strided:
                self.line(self.strided_copy(op.dest, op.value.type, place, load=False))  # type: ignore[arg-type]
            elif self.soa:
                self.line(self.soa_copy("store", f"{dst} + first", f"smem + {off}", size, place))
            else:
                self.line(self.copy(f"{dst} + first * {size}", f"smem + {off}", f"count * {size}", size, place))
        else:
            vector = row_vector(size, self.itemsize)
            row = (lambda index, r: f"irf_store_row<{size}, {vector}>({dst} + ({index}), {r});") if vector > 1 else None
            self.line(self.per_thread(op.value, lambda index, r, k: f"{dst}[{index}] = {r}[{k}];", op.dest, row=row))

    def line(self, text: str) -> None:
        current = self.open[-1]
        if not current or not isinstance(current[-1], list):
            current.append([])
        current[-1].append(text)

    def emit_barrier(self, op: fuse.BarrierOp) -> None:
        self.open[-1].append(BARRIER)
        self.info.barriers += 1

    def emit_ops(self, block) -> None:
        handlers = {fuse.LoadOp: self.emit_load, fuse.CallOp: self.emit_call, fuse.StoreOp: self.emit_store,
                    fuse.BarrierOp: self.emit_barrier, fuse.CopyOp: self.emit_copy, fuse.LoopOp: self.emit_loop,
                    fuse.YieldOp: self.emit_yield}
        for op in block.ops:
            if self.staged_reads and not isinstance(op, fuse.LoadOp):
                self.finish_staged_loads()
            if self.pending_uniform and not isinstance(op, fuse.LoadOp):
                self.flush_uniform_copies()
            if self.pending_sums and not isinstance(op, fuse.LoadOp):
                for text in self.pending_sums:
                    self.line(text)
                self.pending_sums = []
            if self.pending_async and not isinstance(op, fuse.LoadOp):
                self.line("  irf_async_wait();")
                self.pending_async = False
            handler = handlers.get(type(op))
            if handler is None:
                raise CompileError(f"the CUDA emitter does not handle '{op.name}'")
            handler(op)  # type: ignore[operator]

    def describe(self) -> KernelBody:
        """The kernel's statements built (once), with its launch interface made final: its
        shared arrays apart from the planned buffer, and whether its shared memory fits the
        static limit (else a launch takes all of it dynamically)."""
        self.stage_uniform_inputs()
        self.emit_ops(self.kernel.body.block)
        if self.kernel.finish_parts is not None:
            self.finish_in_last_block()
        self.info.arrays = [words for _, words in self.block_arrays]
        total = self.info.total_shared_bytes(self.itemsize)
        if total > STATIC_SHARED_LIMIT:
            if total > fuse.MAX_SHARED_BYTES_PER_BLOCK:
                raise CompileError(f"kernel @{self.info.name} needs {total} bytes of shared memory, its arrays apart "
                                   f"from the planned buffer included: a block has at most "
                                   f"{fuse.MAX_SHARED_BYTES_PER_BLOCK}; use fewer elements per block")
            self.info.dynamic_shared = True
        self.info.after_previous_grid = True  # every kernel waits for the previous grid (render_gpu)
        return KernelBody(self.info, self.itemsize, self.bx, self.by, self.elements_per_thread, self.nthreads,
                          self.words, self.min_blocks, self.soa,
                          [self.names.get(a, "g_") for a in self.kernel.input_args],
                          [self.names.get(a, "g_") for a in self.kernel.output_args],
                          self.body, self.regs, self.block_arrays, self.staged_arrays, self.staged_sources,
                          self.constant_arrays, self.tables)


def tree_step(red: str, kind: str, size: int, half: int, count: str | None, start: str, stride: int) -> str:
    """One step of a block's reduction tree over staging array `red` (an element's `size`
    words at element * size): element i < half takes element i + half where that exists
    among `count` (None: where every such element exists, so the step needs no test), its
    words taken from `start` by `stride` (the block's threads, or one loop on the CPU). The
    GPU kernel, its twin and the loop rendering run the same steps, so the same bits."""
    step = "++irf_i" if stride == 1 else f"irf_i += {stride}"
    both = COMBINE[kind].format(a=f"{red}[irf_i]", b=f"{red}[irf_i + {half * size}]")
    test = "" if count is None else f"if (irf_i / {size} + {half} < {count}) "
    return f"for (int irf_i = {start}; irf_i < {half * size}; {step}) {test}{red}[irf_i] = {both};"


def partial_write(dst: str, red: str, size: int, by: int, block: str, start: str, stride: int) -> str:
    """The block's partial (the tree's element 0) written word-major: word k at k * blocks + block."""
    step = "++irf_k" if stride == 1 else f"irf_k += {stride}"
    return (f"for (int irf_k = {start}; irf_k < {size}; {step}) "
            f"{dst}[(long long)irf_k * ((n + {by - 1}) / {by}) + {block}] = {red}[irf_k];")


# Where a kernel's loop over elements begins in the source (the host build's default rendering).
CPU_LOOP_GUARD = "#elif defined(IRFUSE_CPU_LOOP)"


def renders_loops(source: str) -> bool:
    """Whether some kernel of `source` has a loop rendering (else both CPU renderings run
    every kernel's twin)."""
    return CPU_LOOP_GUARD in source


def emit_kernel(kernel: fuse.KernelOp, itemsize: int = 4, min_blocks: int | None = None,
                library: Library | None = None, strided: dict[int, tuple[int, ...]] | None = None,
                cpu_loop: Callable | None = None, constants: dict[int, float] | None = None
                ) -> tuple[str, KernelInfo, set[tuple[Implementation, str]]]:
    """The kernel's CUDA C (its GPU kernel and, under `IRFUSE_HOST`, its CPU twin: two
    renderings of one `KernelBody`), what a launcher needs to know of it, and the
    device-function variants it calls (looked up in `library`, the default library when
    None); `strided`: its global arguments (by position) that are strided views, with their
    strides. `cpu_loop` (`render_cpu_loop.cpu_loop_kernel`, given by the driver, which this
    module does not import): a third rendering, the kernel as a loop over its elements, under
    `IRFUSE_CPU_LOOP` as well, where it takes the kernel. `constants`: its uniform inputs (by
    position) that every launch gives the same literal (`kernel.bridge.literal_arguments`), written into
    its GPU kernel and CPU twin as literals."""
    emitter = KernelEmitter(kernel, itemsize, min_blocks, library, strided, constants)
    body = emitter.describe()
    used = set(emitter.used)
    loop: list[str] = []
    if cpu_loop is not None:
        rendered = cpu_loop(kernel, itemsize, library, strided)
        if rendered is not None:
            loop = [CPU_LOOP_GUARD, *rendered[0]]
            used |= rendered[1]
    text = "\n".join(["#ifndef IRFUSE_HOST", *gpu_kernel(body), *loop, "#else", *cpu_kernel(body), "#endif"])
    return text, body.info, used


def emit_sums_kernel(kernel: fuse.KernelOp, itemsize: int, sums: tuple[int, ...], name: str,
                     min_blocks: int | None = None, library: Library | None = None
                     ) -> tuple[str, KernelInfo, set[tuple[Implementation, str]]]:
    """`kernel` (its threads each running their own elements) as kernel `name` whose inputs at
    positions `sums` are a scatter's sums, which it adds itself where it loads them
    (`KernelEmitter.emit_sums`): each such input is given as the element kernel's group
    partials (rows of the element type),
    then the scatter order's node offsets (`long long`, one more than the elements) and
    partial numbers (`int`). So statements run per node after a scatter run in the kernel that
    adds each node's partials: the sums never go through memory, and a launch less runs
    (`transforms.node_phases`, `driver.compile.compile_stages`). GPU kernel and CPU twin."""
    if kernel.bx.data != 1:
        raise CompileError(f"kernel @{kernel.sym_name.data}: a scatter's sums are read by a row of threads an "
                           f"element (bx 1), not {kernel.bx.data}")
    emitter = KernelEmitter(kernel, itemsize, min_blocks, library)
    if min_blocks is None:
        # At most 1,024 threads an SM: each node's loop over its partials holds more registers
        # than the kernel it came from, which asked for more blocks (the explicit step's spilled
        # at 13 blocks of 128 threads, and the module was compiled again at 8).
        emitter.min_blocks = emitter.info.min_blocks = min(emitter.min_blocks, default_min_blocks(emitter.nthreads))
    for k in sums:
        emitter.sums[kernel.input_args[k]] = (f"irf_starts{k}", f"irf_slots{k}")
    body = emitter.describe()
    info = body.info
    info.name = name
    types = list(info.input_types) or [""] * len(info.inputs)
    for k in sorted(sums, reverse=True):
        body.inputs[k + 1:k + 1] = [f"irf_starts{k}", f"irf_slots{k}"]
        info.inputs[k + 1:k + 1] = [f"{info.inputs[k]}@starts", f"{info.inputs[k]}@slots"]
        info.input_sizes[k + 1:k + 1] = [1, 1]
        types[k + 1:k + 1] = ["long long", "int"]
    info.input_types = types
    text = "\n".join(["#ifndef IRFUSE_HOST", *gpu_kernel(body), "#else", *cpu_kernel(body), "#endif"])
    return text, info, set(emitter.used)


def kernels_of(module: ModuleOp) -> list[fuse.KernelOp]:
    return [op for op in module.ops if isinstance(op, fuse.KernelOp)]


def emit_module(module: ModuleOp, element: ElementType, min_blocks: dict[str, int] | None = None,
                library: Library | None = None, cpu_loop: Callable | None = None,
                sums_kernels: Sequence[tuple[fuse.KernelOp, tuple[int, ...], str]] = ()) -> EmittedModule:
    """The complete CUDA C of every kernel for one element type; `min_blocks` overrides the
    launch-bounds minimum per kernel name; `cpu_loop`: see `emit_kernel`; `sums_kernels`:
    (kernel of another module, inputs that are a scatter's sums, name) emitted too as
    `emit_sums_kernel` makes them."""
    min_blocks = min_blocks or {}
    kernels = kernels_of(module)
    if not kernels and any(op.name in ("kas.call", "kas.gather") for op in module.walk()):
        raise CompileError("no fuse.kernel to emit: run a lowering pass first (e.g. -p fuse-each)")
    # A program without calls (it returns its inputs) has no kernel: its source is the prelude.
    texts, infos = [], []
    functions: dict[str, str] = {}
    strided = strided_arguments(module)
    constants = literal_arguments(module)
    emitted = [emit_kernel(k, element.itemsize, min_blocks.get(k.sym_name.data), library,
                           strided.get(k.sym_name.data), cpu_loop, constants.get(k.sym_name.data)) for k in kernels]
    emitted += [emit_sums_kernel(k, element.itemsize, sums, name, min_blocks.get(name), library)
                for k, sums, name in sums_kernels]
    uses: list[list[str]] = []  # each planned kernel's device functions, by name
    for text, info, used in emitted:
        texts.append(text)
        infos.append(info)
        uses.append([])
        for impl, variant in sorted(used, key=lambda p: p[0].variant_name(p[1])):
            name = impl.variant_name(variant)
            uses[-1].append(name)
            if name not in functions:
                src = impl.device_source(variant)
                for ap in impl.aps:
                    c_start(ap, impl.bx)  # refuses BY, which generated code cannot see
                functions[name] = re.sub(r"\bBX\b", str(impl.bx), src)
    planned = len(texts)
    combines = sorted({(op.reduce_kind.value, op.res.type.size) for op in module.walk()  # type: ignore[attr-defined]
                       if isinstance(op, fuse.CombineOp)})
    for kind, size in combines:
        text, info = combine_kernel(kind, size)
        texts.append(text)
        infos.append(info)
    scatters = sorted({(op.res.type.size, op.index.type.count.data)  # type: ignore
                       for op in module.walk() if isinstance(op, kas.ScatterOp)})
    for size in sorted({size for size, _ in scatters}):
        for text, info in [scatter_kernel(size), scatter_kernel(size, onto=True), zero_kernel(size)]:
            texts.append(text)
            infos.append(info)
    for size, k in scatters:
        for text, info in [scatter_atomic_kernel(size, k), scatter_groups_kernel(size, k)]:
            texts.append(text)
            infos.append(info)
    if any(isinstance(a.type, kas.IndexType) for op in module.walk() for a in op.operands):  # type: ignore[attr-defined]
        for text, info in [index_check_kernel(False), index_check_kernel(True), *transpose_kernels()]:
            texts.append(text)
            infos.append(info)
    def joined(parts: list[str]) -> str:
        return element.c_prelude + "\n\n".join([prelude(), *parts]) + "\n"

    # The units NVRTC compiles apart: each planned kernel with the device functions it calls
    # (a spilling kernel's steps to fewer blocks compile it alone, `driver.compile.build`), and
    # the library's kernels (combines, scatters, index checks: the same text in every program
    # that has them, so NVRTC's cache holds them once for all).
    units = [EmittedModule(joined([*(functions[f] for f in functions if f in uses[i]), texts[i]]), [infos[i]])
             for i in range(planned)]
    if len(texts) > planned:
        units.append(EmittedModule(joined(texts[planned:]), infos[planned:]))
    source = joined([*functions.values(), *texts])
    return EmittedModule(source, infos, tuple(units) or (EmittedModule(source, []),))  # (no kernel: the prelude)


def with_min_blocks(emitted: EmittedModule, min_blocks: dict[str, int]) -> EmittedModule:
    """`emitted` (a module emitted with every kernel's own minimum) with the launch bounds'
    minimum resident blocks of the kernels named in `min_blocks` set to theirs: the same source
    and kernels `emit_module(..., min_blocks)` gives, since the minimum is only the bounds'
    second number (`render_gpu`), without emitting every kernel again (a compile that steps a
    spilling kernel to fewer blocks emits the module once)."""
    source, kernels = emitted.source, []
    for info in emitted.kernels:
        blocks = min_blocks.get(info.name, info.min_blocks)
        if blocks != info.min_blocks:
            bounds = re.compile(rf"(__launch_bounds__\(\d+, ){info.min_blocks}(\) {re.escape(info.name)}\()")
            source, found = bounds.subn(rf"\g<1>{blocks}\g<2>", source)
            if found != 1:
                raise CompileError(f"kernel @{info.name}: {found} launch bounds found in its module's source, not 1")
            info = dataclasses.replace(info, min_blocks=blocks)
        kernels.append(info)
    units = tuple(with_min_blocks(u, {k.name: min_blocks[k.name] for k in u.kernels if k.name in min_blocks})
                  for u in emitted.units)
    return EmittedModule(source, kernels, units)
