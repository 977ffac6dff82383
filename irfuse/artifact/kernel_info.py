"""The launch interface of one emitted kernel: what a launcher needs to know of it (its
block, grid, arguments, shared memory, launch bounds), written by the emitter, saved in a
plan's manifest, and read by the runtime, which needs nothing else of the compiler."""

from __future__ import annotations

from dataclasses import field

from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import slot_ctype


# The kernel a call on GPU arrays checks each connectivity with (`backend.scatter_emit`):
# emitted into every program that reads a connectivity, launched by `api.mesh_gpu_calls`.
CHECK_INDEX_KERNEL = "irf_check_index"
# Its twin for int64 node numbers: checked the same way and narrowed into an int32 copy of
# irfuse's own, which the kernels read.
CHECK_INDEX64_KERNEL = "irf_check_index64"
# A structure of arrays (every component a run over the count) into an array of structures
# of irfuse's own and back: how a program over a mesh runs on GPU arrays in structures of
# arrays, its kernels reading arrays of structures.
ROWS_OF_COLUMNS_KERNEL, COLUMNS_OF_ROWS_KERNEL = "irf_rows_of_columns", "irf_columns_of_rows"


@record
class KernelInfo:
    """What a launcher needs to know about one emitted kernel."""

    name: str
    bx: int
    by: int
    shared_words: int
    inputs: list[str]
    outputs: list[str]
    input_sizes: list[int]
    output_sizes: list[int]
    calls: list[str] = field(default_factory=list)
    barriers: int = 0
    register_values: int = 0
    shared_values: int = 0
    barriers_before: int | None = None  # before fuse-place-barriers, when it ran
    dynamic_shared: bool = False  # shared memory taken at launch (over the static limit)
    min_blocks: int = 1  # __launch_bounds__ minimum resident blocks: caps registers per thread
    once: bool = False  # runs over one element (uniform values from uniform values)
    reduced: list[str] = field(default_factory=list)  # per output: the reduction its partials are for, or ""
    arrays: list[int] = field(default_factory=list)  # words of each shared array apart from the planned buffer
    fixed_grid: int = 0  # blocks of every launch (a combine kernel's: one per word); 0: one per `by` elements
    per_thread: int = 1  # elements each thread runs: the block has by / per_thread thread rows
    # Starts with irf_after_previous_grid(): may be launched as a programmatic dependent launch.
    after_previous_grid: bool = False
    # Per input, the C type of its words where it is not the element type: "int" for a
    # connectivity's node numbers, "long long" for offsets (empty: every input is `real_t`).
    input_types: list[str] = field(default_factory=list)
    output_types: list[str] = field(default_factory=list)  # the same of outputs ("long long": a flag)
    # Its last block combines its reductions' partials in a launch of at most this many blocks
    # (`fuse.kernel` finish_parts; 0: never). Such a kernel takes, after its outputs, one result
    # per reduced output (in order) and a counter of finished blocks, 0 before the launch (the
    # last block sets it back); null pointers there leave the partials to the combine kernels.
    finish_parts: int = 0
    # Per output: where it holds a scatter's rows, the elements' nodes (K), else 0. Such a
    # kernel sums its blocks' rows in the connectivity's groups (`scatter_groups`) and writes
    # the partials; it takes, after everything else, the connectivity's members, firsts and
    # group bases per such output, then the nodal sums and the connectivity (`group_params`):
    # null members and a nodal array (atomics, on the GPU): it adds each row into its node
    # there with atomicAdd; null members and null sums: it writes every row as it is.
    grouped: list[int] = field(default_factory=list)

    def group_params(self) -> list[tuple[str, str]]:
        """(C type of the parameter, name) of each parameter after everything else of a kernel
        that sums a scatter's rows in groups: per such output, the members, firsts and group
        bases of its connectivity, the nodal sums its rows go into under atomics, and the
        connectivity itself."""
        out = []
        for j, k in enumerate(k for k in self.grouped if k):
            slot = f"const {slot_ctype(k)}*"  # (a slot's number in its group: one byte, or two past 256 slots)
            out += [(ctype, f"{name}{j}") for ctype, name in ((slot, "irf_members"), (slot, "irf_firsts"),
                                                               ("const int*", "irf_bases"), ("real_t*", "irf_atomic"),
                                                               ("const int*", "irf_conn"))]
        return out

    def input_ctype(self, i: int) -> str:
        """The C type of input `i`'s words."""
        return (self.input_types[i] if i < len(self.input_types) else "") or "real_t"

    def output_ctype(self, i: int) -> str:
        """The C type of output `i`'s words."""
        return (self.output_types[i] if i < len(self.output_types) else "") or "real_t"

    @property
    def threads(self) -> int:
        return self.bx * self.by // self.per_thread

    @property
    def block_dims(self) -> tuple[int, int, int]:
        """The launch's block: bx threads per element, one row per `per_thread` elements."""
        return (self.bx, self.by // self.per_thread, 1)

    def shared_bytes(self, itemsize: int) -> int:
        return self.shared_words * itemsize

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in (
            "name", "bx", "by", "shared_words", "inputs", "outputs", "input_sizes", "output_sizes",
            "calls", "barriers", "barriers_before", "register_values", "shared_values", "dynamic_shared",
            "min_blocks", "once", "reduced", "arrays", "fixed_grid", "per_thread", "after_previous_grid", "input_types",
            "output_types", "finish_parts", "grouped")}

    def array_offsets(self, itemsize: int) -> list[int]:
        """Where the arrays apart from the planned buffer start, in words from its start: after
        it, each 16-byte aligned (as the compiler lays out static arrays, and as they sit in
        the one dynamic buffer of a kernel over the static limit)."""
        align = max(1, 16 // itemsize)
        offsets, end = [], self.shared_words
        for words in self.arrays:
            offsets.append(-(-end // align) * align)
            end = offsets[-1] + words
        return offsets

    def total_shared_bytes(self, itemsize: int) -> int:
        """Bytes of shared memory a block takes: the planned buffer and the arrays after it."""
        offsets = self.array_offsets(itemsize)
        return (offsets[-1] + self.arrays[-1] if self.arrays else self.shared_words) * itemsize

    def static_shared_bytes(self, itemsize: int) -> int:
        """Bytes of static shared memory (what ptxas reports): all of it, or none for a kernel
        over the static limit, which takes all of it at launch."""
        return 0 if self.dynamic_shared else self.total_shared_bytes(itemsize)

    def dynamic_shared_bytes(self, itemsize: int) -> int:
        """Bytes of shared memory a launch must ask for (0 below the static limit)."""
        return self.total_shared_bytes(itemsize) if self.dynamic_shared else 0

    def blocks(self, n: int) -> int:
        """Blocks of a launch over n elements (a kernel that runs once: one)."""
        return self.fixed_grid or (1 if self.once else -(-n // self.by))

    def finishes_in_last_block(self, n: int) -> bool:
        """Whether a launch over n elements is few enough blocks for its last block to combine
        its reductions' partials (`finish_parts`), on a device that lets it."""
        return bool(self.finish_parts) and self.blocks(n) <= self.finish_parts

    @staticmethod
    def from_json(d: dict) -> "KernelInfo":
        return KernelInfo(**d)
