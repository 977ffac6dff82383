"""Policies the emitted kernel follows, decided from its model: the resident blocks its
launch bounds ask for (`launch_min_blocks`), which loads of a structure-of-arrays kernel go
through shared memory in 16-byte runs (`staged_run_loads`), and so the shared arrays it
declares apart from the planned buffer (`array_words`), the vectors a thread reads and writes
its element's row in (`row_vector`). The planner's cost model and the
emitter read the same functions, so what is costed is what is emitted.
"""

from __future__ import annotations

from irfuse.kernel.model import KernelModel, OpKind, Patterns


# Bytes of loads an SM must keep in flight to stream at the copy bandwidth: bandwidth per SM
# times the turnaround from a block's loads to the next block's (H200: 4.26 TB/s / 132 SMs x
# about 1.4 us, the larger of the two built-in GPUs). Measured on SyncTest's kernel (4.6 KB a
# block), 10 resident blocks asked stream fastest on the H200 (8: 3% slower; 11 and 12:
# 0.5-0.7%) and faster than 11 on the H100 (benchmarks/NOTES.md, Seed programs, 2026-11-23; Calls
# from Python, 2026-11-24).
IN_FLIGHT_BYTES = 45 * 1024


# Threads per SM asked of a kernel without loops that gathers (`launch_min_blocks`): its
# element code waits on dependent loads (the node numbers, then the rows they name) and issues
# many instructions an element, and more resident warps fill the schedulers' idle cycles (Nsight
# Compute on the mesh energy's kernel: 0.71 instructions issued a scheduler cycle, 27% of cycles
# with no warp eligible, at 9 resident blocks of 128 threads). Measured on an H200, the
# Neo-Hookean mesh energy and its gradient (12.6 M tetrahedra, 53-55 registers at 1024
# threads): asked for 10 blocks of 128 threads, ptxas fits both in 48 registers without
# spilling, 0.211 -> 0.202 ms and 0.513 -> 0.492 ms, the same bits; asked for 12 (40
# registers, some spilled) the energy took 0.219 (benchmarks/NOTES.md, Meshes: gathers and scatters, 2026-11-28).
GATHER_THREADS = 1280


# The most words of one value a thread holds in registers (sm_70 and later give a thread at
# most 255): a value of more words a thread would live in local memory whatever the launch
# bounds, and its calls' straight-line code of that many words a thread is what the C
# compilers cannot take (a random mesh program's 514-word gathered rows: g++ out of 12 GB
# after four minutes, benchmarks/NOTES.md, Robustness runs, 2026-12-02). Such a value stays in
# shared memory (`transforms.promotion`).
REGISTER_WORDS = 255
# The warp schedulers of an SM (four sub-partitions on every sm_70 and later GPU, each issuing
# from its own warps): a kernel whose resident blocks give an SM fewer warps leaves some idle,
# and the search keeps it only where nothing else runs the group (`planner.search._idle_schedulers`).
SCHEDULERS_PER_SM = 4


def launch_min_blocks(model: KernelModel) -> int:
    """Resident blocks the emitted kernel asks ptxas for (`__launch_bounds__`): 1024 threads
    per SM, i.e. at most 64 registers per thread; `GATHER_THREADS` for a kernel without loops
    that gathers; more for a kernel without loops whose blocks load so little that 1024
    threads keep less than `IN_FLIGHT_BYTES` of loads in flight (SyncTest: 4.6 KB a block, 8
    blocks keep 37 KB; asked for 10, ptxas fits it in 47 registers and it streams 3-4% faster
    on an H200), up to 2048 threads per SM.

    Without a minimum, `__launch_bounds__` lets ptxas squeeze registers for full occupancy
    and spill; without launch bounds at all it assumes 1024-thread blocks. A kernel that
    spills at the raised minimum is compiled again at 1024 threads (`driver.compile.build`).
    """
    if model.once:
        return 1  # one block over one element
    base = default_min_blocks(model.threads)
    if model.gathers() and not model.has_loops():
        return max(base, GATHER_THREADS // model.threads)
    loaded = model.by * model.itemsize * model.batch_loads()
    if model.has_loops() or not loaded or base * loaded >= IN_FLIGHT_BYTES:
        return base
    return max(base, min(2048 // model.threads, -(-IN_FLIGHT_BYTES // loaded)))


def array_words(model: KernelModel) -> int:
    """Shared words the emitted kernel declares apart from the planned buffer: each uniform
    input's block copy, each reduction's staging of the block's elements, and the runs of
    each register load staged through shared memory (`staged_run_loads`)."""
    staged = sum(model.values[model.ops[i].value].size * model.by for i in staged_run_loads(model))  # type: ignore[index]
    return staged + sum(model.values[op.value].size * (model.by if op.kind == OpKind.STORE else 1)  # type: ignore[index]
                        for op in model.ops
                        if (op.kind == OpKind.LOAD and model.values[op.value].uniform)  # type: ignore[index]
                        or (op.kind == OpKind.STORE and op.reduce))


# Bytes of shared memory a block may add for staged loads (`staged_run_loads`).
STAGED_RUN_BYTES = 64 * 1024


def staged_run_loads(model: KernelModel) -> list[int]:
    """Indices of the loads a structure-of-arrays kernel stages through shared memory although
    their values live in registers: its leading loads (before its first other op) of
    per-element values, each held whole by one thread of its element. On the GPU the block
    copies such a value's runs (word k of its `by` elements, contiguous in global memory) with
    16-byte asynchronous copies, all the loads' at once, then each thread reads its words
    after one barrier: 4-byte loads straight into registers stream 1-3.5% slower on an H100
    and an H200 (benchmarks/NOTES.md, Structures of arrays, 2026-11-24). The CPU backend loads directly.

    All of them or none: with some of BigFusion's loads staged and the others direct, its
    results were off the direct kernel's by rounding on an H100 and an H200 (within the
    verification's bounds; the same PTX arithmetic, which ptxas compiled differently), while
    every kernel measured with all of them staged gave the direct kernel's bits, which a
    variant for strided views (whose runs cannot be staged, `cuda_emit`) must reproduce.
    Offered where the runs are whole 16-byte pieces (`by` a multiple of 16 bytes' words) and
    the staging takes at most `STAGED_RUN_BYTES` a block (the cost model sees it through
    `array_words`)."""
    if (model.layout != "soa" or model.once or model.per_thread != 1 or model.bx != 1
            or model.by % (16 // model.itemsize)):
        return []
    out: list[int] = []
    patterns = Patterns(model)  # (one walk of the ops for every load's pattern)
    for i, op in enumerate(model.ops):
        if op.kind != OpKind.LOAD:
            break
        v = model.values[op.value]  # type: ignore[index]
        if v.shared or v.uniform:
            continue
        ap, bx, remap = patterns(v.id)
        if v.carried or bx != 1 or remap or ap.relative() != frozenset(range(v.size)):
            return []
        out.append(i)
    staged = sum(model.values[model.ops[i].value].size for i in out) * model.by * model.itemsize  # type: ignore[index]
    return out if staged <= STAGED_RUN_BYTES else []


def default_min_blocks(threads: int) -> int:
    """The resident blocks asked of ptxas for any kernel: 1024 threads per SM."""
    return max(1, 1024 // threads)


def row_vector(size: int, itemsize: int) -> int:
    """Words a thread reads or writes at once of its element's row of `size` words in an
    array-of-structures batch: the widest vector of at most 16 bytes dividing the row, so that
    every row starts at a multiple of it (a batch starts 16-byte aligned:
    `api.device_arrays.ALIGNMENT`). A warp's accesses then touch each of the rows' lines once a
    vector (StrainEnergy's 24-byte strain: 8-byte loads, 18 wavefronts a warp against 36 a word
    at a time). The emitter's loads and stores and the promotion's count of them read it."""
    return next(w for w in (16 // itemsize, 8 // itemsize, 4 // itemsize, 1) if w >= 1 and size % w == 0)
