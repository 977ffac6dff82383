"""A batch in host memory run through the device in chunks.

Every element of a batch is independent, so a batch larger than the device memory one
wants to spend on it runs as consecutive chunks of `chunk` elements (the last one shorter),
each a run of the same plan over its own slice. Results are those of one call, bit for bit:
the kernels see the same elements, only fewer at a time.

On the GPU two lanes alternate: each holds device buffers for one chunk (its inputs,
outputs and the temporaries between kernels) and a stream of its own. A caller's array in
page-locked memory (`irfuse.pinned_empty`, PyTorch's `pin_memory()`, PyCUDA's
`pagelocked_empty`, or NumPy arrays inside `with irfuse.page_locked(...)`) is copied straight
from and into by each lane's stream, the host only queuing work, so the transfers in both
directions and the kernels of consecutive chunks overlap. Any other array goes through
page-locked buffers of the lane's own, copied by host threads (the lane's results coming out
of them when the lane is next needed), which costs host memory bandwidth. irfuse never locks
a caller's pages on its own: locking them for each call costs about what staging them does,
and keeping them locked past the call would outlive what the caller does with the memory
afterwards. `page_locked` locks them for a block of calls the caller delimits.

On the CPU backend the same chunks run one after another (slices copied into buffers of a
chunk and back), which is what the tests of chunking use.

A uniform input (one value for the whole batch) goes whole to every chunk. A program that
reduces over the batch runs as passes over its chunks (`analysis.batch_passes`): chunks of a
whole number of its reducing kernels' blocks give the partials of one call's blocks, which
go into a buffer of the whole batch's partials; after a pass, each reduction is combined
once over all of them by the kernel one call uses, and the next pass reads the combined
values. A pass reads again the inputs it needs (what it computes from them is computed
again): the batch crosses to the device once per pass that reads it. A pass whose work is
uniform (it gives no per-element output and no partials) runs on one chunk.
"""

from __future__ import annotations

import contextlib
import math
import os
import weakref
from collections.abc import Callable

import numpy as np

from irfuse.artifact.arrays import batch_shape
from irfuse.artifact.host_plan import UNIFORM, BatchPass, Combine
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.diagnostics import UsageError
from irfuse.runtime.device import Slot, in_order
from irfuse.runtime.executor import Executor

LANES = 2
OUTPUT_KEY = "out:"  # an output's key among the arrays (a program may return under an input's name)
# Device bytes a lane's chunk takes at most whatever the budget: chunks small enough that
# the copies and kernels of consecutive chunks overlap for most of a large batch.
CHUNK_BYTES = 256 << 20
# The first chunk's copy in and the last one's copy out overlap nothing: a batch of C chunks
# takes about (C + 1) chunks' transfer time. A batch of at least MIN_CHUNKS * MIN_CHUNK_BYTES
# therefore runs in MIN_CHUNKS chunks or more (a 604 MB batch in three chunks of 200 MB
# reached 69-76% of the transfer floor on an H100, benchmarks/NOTES.md); smaller chunks
# than MIN_CHUNK_BYTES would pay the per-chunk host work more than they save.
MIN_CHUNKS = 8
MIN_CHUNK_BYTES = 16 << 20
# Host copies of at least this many bytes are split over threads (NumPy releases the GIL).
PARALLEL_COPY_BYTES = 4 << 20
_COPY_THREADS = min(16, os.cpu_count() or 1)
_pool = None  # (a ThreadPoolExecutor, made with the first large copy)


# host plan -> (bytes per element, elements a chunk holds a multiple of, (words, kernel making
# the partials) of each reduction): found once per program (every host call chooses chunks)
_sizes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Sizes:
    def __init__(self, per_element: int, align: int, reductions: tuple[tuple[int, KernelInfo], ...]):
        self.per_element, self.align, self.reductions = per_element, align, reductions


def _sizes_of(compiled) -> _Sizes:
    """What chunks are chosen from (see `_sizes`)."""
    host = compiled.host
    if host not in _sizes:
        words = sum(host.values[v].words for _, v in host.inputs if host.values[v].extent != UNIFORM)
        words += sum(host.values[r].words for launch in host.launches() for r in launch.results
                     if host.values[r].extent != UNIFORM)
        reductions = tuple((host.values[c.result].words, partials_kernel(compiled, c)) for c in host.combines())
        _sizes[host] = _Sizes(max(1, words) * compiled.itemsize, host.align, reductions)
    return _sizes[host]


def chunk_alignment(compiled) -> int:
    """Elements a chunk holds a multiple of when a batch takes several: those of the blocks
    whose partials the program's reductions combine (1 for a program that does not reduce)."""
    return _sizes_of(compiled).align


def bytes_per_element(compiled) -> int:
    """Device bytes one element of a chunk takes: every input, temporary and output that has
    a value per element (a uniform one's few words are not counted; a reduction's partials
    are, as if every element had its own)."""
    return _sizes_of(compiled).per_element


def partials_kernel(compiled, combine: Combine) -> KernelInfo:
    """The kernel that makes the partials a reduction combines (its blocks are the partials)."""
    return compiled.kernel(compiled.host.values[combine.partials].kernel)


def reduction_bytes(compiled, n: int) -> int:
    """Device bytes a batch of n elements in chunks keeps for its reductions: the partials of
    all of its blocks and the combined values."""
    return sum(size * (kernel.blocks(n) + 1) for size, kernel in _sizes_of(compiled).reductions) * compiled.itemsize


def device_budget(dev, budget: int | None) -> int | None:
    """The device memory a call on host arrays may take: `budget` where given, else on a GPU
    half of its free memory, else None (the CPU: one piece). Where every call's default is
    decided, plain programs and programs over a mesh alike."""
    if budget is not None:
        return budget
    free = dev.free_memory()
    return None if free is None else free // 2


def chunk_elements(compiled, n: int, budget: int | None) -> int:
    """Elements per chunk: what `LANES` lanes' buffers allow within `budget` bytes (beside
    what reductions keep, `reduction_bytes`), at most `CHUNK_BYTES` a lane, and few enough
    for `MIN_CHUNKS` chunks where they would still hold `MIN_CHUNK_BYTES` (all of the batch
    when no budget is given); a multiple of the reducing kernels' elements per block when the
    batch takes more than one chunk."""
    if budget is None:
        return max(n, 1)
    one = bytes_per_element(compiled)
    per = one * LANES
    kept = reduction_bytes(compiled, n)
    beside = f" beside the {kept} bytes its reductions keep for a batch of {n} elements" if kept else ""
    if budget - kept < per:
        raise UsageError(f"a device-memory budget of {budget} bytes cannot hold one element in each of {LANES} "
                         f"lanes ({per} bytes){beside}")
    lane_bytes = min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, one * n // MIN_CHUNKS))
    chunk = min(n, max(1, lane_bytes // one), (budget - kept) // per)
    align = chunk_alignment(compiled)
    return max(1, whole_chunk(chunk, n, align, lambda: (
        f"a device-memory budget of {budget} bytes cannot hold {align} elements in each of {LANES} lanes "
        f"({per * align} bytes){beside}: a chunk of this program holds a multiple of {align} elements, the blocks "
        "whose partials its reductions combine")))


def whole_chunk(chunk: int, n: int, align: int, refusal) -> int:
    """`chunk` elements of a batch of `n` moved down to a multiple of `align` where the batch
    takes several chunks; a UsageError saying `refusal()` where not even `align` fit."""
    if chunk < n and chunk % align:
        if chunk < align:
            raise UsageError(refusal())
        chunk -= chunk % align
    return chunk


def is_page_locked(a: np.ndarray) -> bool:
    """Whether a C-contiguous array lies in page-locked memory (allocated so, or registered
    with the driver by its owner), first and last byte alike: the driver copies such memory
    without staging it."""
    if not a.flags.c_contiguous or not a.nbytes:
        return False
    from irfuse.runtime.cuda_graph import cuda_driver

    cu = cuda_driver()
    for ptr in (a.ctypes.data, a.ctypes.data + a.nbytes - 1):
        err, _ = cu.cuMemHostGetFlags(ptr)
        if err != cu.CUresult.CUDA_SUCCESS:
            return False
    return True


def pinned_empty(shape, dtype=np.float32) -> np.ndarray:
    """A new NumPy array in page-locked host memory (freed with it): batches in such arrays
    stream through the GPU at the transfer rate."""
    from irfuse.runtime.cuda_device import import_pycuda, primary_context

    drv = import_pycuda()
    context = primary_context(drv)
    context.push()
    try:
        return drv.pagelocked_empty(tuple(shape) if not isinstance(shape, int) else (shape,), np.dtype(dtype),
                                    mem_flags=drv.host_alloc_flags.PORTABLE)
    finally:
        context.pop()


@contextlib.contextmanager
def page_locked(*arrays: np.ndarray):
    """Locks the pages of NumPy arrays in host memory for the calls inside the block: batches
    in them then stream to and from the GPU straight, as `pinned_empty` arrays do, instead of
    through staging buffers. The pages are registered with the CUDA driver when the block
    starts and released when it ends (the block holds the arrays, which must not be resized
    in it). Locking costs about one staged call's time; a loop of calls on the same arrays
    gains it back at the first call. An array already page-locked, or one that shares pages
    with memory locked otherwise, is left as it is. Lock what the calls need: locked memory
    cannot be paged out."""
    for k, a in enumerate(arrays, 1):
        if not isinstance(a, np.ndarray):
            raise UsageError(f"irfuse.page_locked: argument {k} is a {type(a).__name__}, not a NumPy array")
        if not a.flags.c_contiguous:
            raise UsageError(f"irfuse.page_locked: argument {k} is not C-contiguous (strides {a.strides}): only "
                             f"a C-contiguous array is copied straight to and from the GPU")
    from irfuse.runtime.cuda_device import import_pycuda, primary_context
    from irfuse.runtime.cuda_graph import checked, cuda_driver

    drv = import_pycuda()
    cu = cuda_driver()
    context = primary_context(drv)
    locked: list[np.ndarray] = []

    def release() -> None:
        context.push()
        try:
            for a in locked:
                checked(cu.cuMemHostUnregister(a.ctypes.data), "cuMemHostUnregister")
        finally:
            context.pop()
            locked.clear()

    context.push()
    try:
        for k, a in enumerate(arrays, 1):
            if not a.nbytes or is_page_locked(a) or any(a is b for b in locked):
                continue
            err, = cu.cuMemHostRegister(a.ctypes.data, a.nbytes, cu.CU_MEMHOSTREGISTER_PORTABLE)
            if err == cu.CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
                continue  # some of its pages are locked by another registration: it stays staged
            if err != cu.CUresult.CUDA_SUCCESS:
                raise UsageError(f"irfuse.page_locked: the driver could not lock argument {k}'s {a.nbytes} bytes: "
                                 f"{err.name}")
            locked.append(a)
    except BaseException:
        context.pop()
        release()
        raise
    context.pop()
    try:
        yield
    finally:
        release()


def _slice(a: np.ndarray, layout: str, start: int, stop: int) -> np.ndarray:
    return a[start:stop] if layout == "aos" else a[..., start:stop]


def _part(a: np.ndarray, layout: str, start: int, stop: int, whole: bool) -> np.ndarray:
    """A chunk's part of an argument: all of a uniform one (`whole`)."""
    return a if whole else _slice(a, layout, start, stop)


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src, over threads for large arrays (split along the first axis of length > 1)."""
    global _pool
    if dst.nbytes < PARALLEL_COPY_BYTES or _COPY_THREADS == 1:
        np.copyto(dst, src)
        return
    axis = next((k for k, d in enumerate(dst.shape) if d > 1), 0)
    parts = min(_COPY_THREADS, dst.shape[axis])
    bounds = np.linspace(0, dst.shape[axis], parts + 1).astype(int)
    if _pool is None:
        # (imported here: concurrent.futures and the logging it imports cost a fresh process
        # 3 ms, which loading a cached program would pay for copies it may never make)
        import concurrent.futures

        _pool = concurrent.futures.ThreadPoolExecutor(_COPY_THREADS, thread_name_prefix="irfuse-copy")
    index = [slice(None)] * dst.ndim

    def part(k: int) -> None:
        index_k = list(index)
        index_k[axis] = slice(bounds[k], bounds[k + 1])
        np.copyto(dst[tuple(index_k)], src[tuple(index_k)])
    list(_pool.map(part, range(parts)))


class ChunkedRun:
    """Runs `compiled` on host arrays in chunks of `chunk` elements (see the module)."""

    def __init__(self, compiled, device, chunk: int, inputs: tuple[str, ...], outputs: tuple[str, ...],
                 shapes: dict[str, tuple[int, ...]], layout: str):
        self.compiled, self.device, self.chunk = compiled, device, chunk
        self.inputs, self.outputs, self.shapes, self.layout = inputs, outputs, shapes, layout
        self.gpu = hasattr(device, "drv")
        self.owned: list = []  # device buffers made for this run, freed by `release`
        self.lanes: list[dict] = []  # made when first used: a batch of one chunk needs one
        self.uniform = compiled.host.uniform_names()  # arguments without a batch axis
        self.plan = compiled.host
        self.combined: dict | None = None  # a buffer per combined reduction, made when first needed

    def _shape(self, k: str, m: int) -> tuple[int, ...]:
        """The shape of argument `k` in a chunk of m elements."""
        return self.shapes[k] if k in self.uniform else batch_shape(self.layout, self.shapes[k], m)

    def _chunk_of(self, k: str, a: np.ndarray, start: int, m: int) -> np.ndarray:
        return _part(a, self.layout, start, start + m, k in self.uniform)

    def _lane(self) -> dict:
        """Slots the recorded runs read and write through, device buffers of a whole chunk
        for them, and on the GPU page-locked host buffers and a stream; recorded runs by
        chunk length (made when first needed: the last chunk is shorter)."""
        dev = self.device
        lane = {"in": {k: Slot() for k in self.inputs}, "out": {k: Slot() for k in self.outputs}, "runs": {},
                "buffers": {}, "partials": {}, "pending": None}
        with self._owning():
            # An output returned under an input's name (`v = f(v); return v;`) gets a buffer
            # of its own: a later kernel of the chunk may still read the input.
            for key, k in self._keys():
                lane["buffers"][key] = dev.alloc(self._shape(k, self.chunk))
            for c in self.plan.combines():  # a chunk's partials, laid out as a batch of that chunk's
                lane["partials"][c.partials] = dev.alloc((self._words(c) * self._blocks(c, self.chunk),))
        if self.gpu:
            drv = dev.drv
            lane["stream"] = drv.Stream()
            lane["host"] = None  # page-locked staging buffers, made when first needed
        return lane

    def _keys(self) -> list[tuple[str, str]]:
        """(buffer key, argument name) of every input, then of every output (`OUTPUT_KEY` +
        name: an output may have an input's name and never shares its buffers)."""
        return [(k, k) for k in self.inputs] + [(OUTPUT_KEY + k, k) for k in self.outputs]

    def _staging(self, lane: dict) -> dict:
        if lane["host"] is None:
            drv = self.device.drv
            lane["host"] = {key: drv.pagelocked_empty(self._shape(k, self.chunk), np.dtype(self.device.dtype))
                            for key, k in self._keys()}
        return lane["host"]

    def recorded(self, lane: dict, m: int, p: int | None):
        """The lane's run of pass `p` (all of the program: None) on a chunk of m elements."""
        run = lane["runs"].get((p, m))
        if run is None:
            part = None if p is None else self.plan.passes[p]
            bound = {}
            if part is not None:
                bound = {c.result: buf for c, buf in self._combined().items()}
                bound.update({v: lane["partials"][v] for v in part.partials})
            with self._owning():
                run = lane["runs"][(p, m)] = Executor(self.compiled, self.device).prepare(
                    {}, m, uploaded=lane["in"], outputs=lane["out"], as_graph=False, part=part, bound=bound)
        return run

    def _combines_of(self, part: BatchPass) -> tuple[Combine, ...]:
        """The combines run after a pass."""
        return tuple(self.plan.steps[i] for i in part.combines)  # type: ignore[misc]

    def _words(self, combine: Combine) -> int:
        """Words of a reduction's value."""
        return self.plan.values[combine.result].words

    def _blocks(self, combine: Combine, n: int) -> int:
        """The blocks, and so the partials, of a reduction over n elements."""
        return partials_kernel(self.compiled, combine).blocks(n)

    def _combined(self) -> dict:
        """The buffers of the reductions' combined values (kept for the next runs)."""
        if self.combined is None:
            with self._owning():
                self.combined = {c: self.device.alloc(self.plan.values[c.result].shape) for c in self.plan.combines()}
        return self.combined

    @contextlib.contextmanager
    def _owning(self):
        """Takes the GPU buffers allocated inside the block from the device's list (which
        frees them when it closes) into this run's, so that `release` frees them."""
        before = len(self.device.allocations) if self.gpu else 0
        try:
            yield
        finally:
            if self.gpu:
                self.owned += self.device.allocations[before:]
                del self.device.allocations[before:]

    def release(self) -> None:
        """Frees the device buffers (the run cannot be used after)."""
        for lane in self.lanes:
            if self.gpu and lane["pending"] is not None:
                lane["stream"].synchronize()
        for buf in self.owned:
            buf.free()
        self.owned.clear()
        self.lanes = []

    def _point(self, lane: dict, m: int) -> None:
        """The slots at the lane's buffers, holding `m` elements laid out for a batch of m."""
        slots = [(k, k, slot) for k, slot in lane["in"].items()]
        slots += [(OUTPUT_KEY + k, k, slot) for k, slot in lane["out"].items()]
        for key, k, slot in slots:
            buf = lane["buffers"][key]
            slot.ptr = int(buf) if self.gpu else buf.ctypes.data
            slot.nbytes = math.prod(self._shape(k, m)) * self.compiled.itemsize
            if not self.gpu:
                slot.array = buf.reshape(-1)[: slot.nbytes // self.compiled.itemsize].reshape(self._shape(k, m))

    def _per_chunk(self, part: BatchPass | None) -> bool:
        """Whether every chunk runs the pass: it gives partials or a per-element output (a
        pass that only makes uniform values makes the same ones on any chunk)."""
        return part is None or bool(part.partials) or any(k not in self.uniform for k in part.outputs)

    def run(self, arrays: dict[str, np.ndarray], results: dict[str, np.ndarray], n: int,
            progress: Callable[[int, int], None] | None = None) -> int:
        """Runs the batch; returns the number of chunks. `progress(done, total)` is called as
        chunks complete, those of every pass (a lane then waits for its chunk before taking
        the next one, which keeps one chunk a lane queued instead of all of them)."""
        starts = range(0, n, self.chunk)
        # One chunk runs the program whole; more run its passes (one when it does not reduce).
        passes = [(p, part) for p, part in enumerate(self.plan.passes)] if len(starts) > 1 else [(None, None)]
        chunks = [starts if self._per_chunk(part) else starts[:1] for _, part in passes]
        self.progress, self.done, self.total, self.n = progress, 0, sum(len(c) for c in chunks), n
        # The arrays that go straight to and from the device (outputs under OUTPUT_KEY + name).
        # (A uniform argument is a few words: always staged.)
        self.locked = {k: self.gpu and k not in self.uniform and is_page_locked(a) for k, a in arrays.items()}
        self.locked.update({OUTPUT_KEY + k: self.gpu and k not in self.uniform and is_page_locked(a)
                            for k, a in results.items()})
        whole: dict = {}  # the partials of the whole batch, made for this call
        try:
            for (p, part), part_starts in zip(passes, chunks):
                if part is not None and part.partials:
                    whole = self._whole_partials(part, n, whole)
                for c, start in enumerate(part_starts):
                    m = min(self.chunk, n - start)
                    k = c % LANES if self.gpu else 0
                    if k == len(self.lanes):
                        self.lanes.append(self._lane())
                    if self.gpu:
                        self._issue_gpu(self.lanes[k], arrays, results, start, m, p, whole)
                    else:
                        self._run_cpu(self.lanes[k], arrays, results, start, m, p, whole)
                for lane in self.lanes:
                    self._finish(lane, results)
                if part is not None and part.combines:
                    self._combine(part, n, whole)
        except BaseException:
            for lane in self.lanes:  # a later call must not receive this call's chunks
                if self.gpu:
                    lane["stream"].synchronize()
                lane["pending"] = None
            raise
        finally:
            if self.gpu and whole:
                self.device.drv.Context.synchronize()  # the combines are done with them
                for buf in whole.values():
                    buf.free()
        return len(starts)

    def _pass_io(self, p: int | None) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Combine, ...]]:
        """The inputs a chunk of pass p uploads, the outputs it gives, the reductions whose
        partials it makes."""
        if p is None:
            return self.inputs, self.outputs, ()
        part = self.plan.passes[p]
        return part.reads, part.outputs, self._combines_of(part)

    def _whole_partials(self, part: BatchPass, n: int, whole: dict) -> dict:
        """Buffers for the pass's partials of the whole batch (added to `whole`)."""
        for c in self._combines_of(part):
            words = self._words(c) * self._blocks(c, n)
            whole[c.partials] = self.device.mem_alloc(words * self.compiled.itemsize) if self.gpu \
                else np.full(words, np.nan, self.device.dtype)
        return whole

    def _partials_of_chunk(self, lane: dict, combines: tuple, whole: dict, start: int, m: int):
        """Copies a chunk's partials into the whole batch's (word k of block b at k * blocks + b:
        a row of the chunk's blocks per word, at the chunk's first block)."""
        for c in combines:
            v = c.partials
            size, by = self._words(c), partials_kernel(self.compiled, c).by
            blocks, mine, first = self._blocks(c, self.n), self._blocks(c, m), start // by
            src, dst = lane["partials"][v], whole[v]
            if not self.gpu:
                dst.reshape(size, blocks)[:, first:first + mine] = src[:size * mine].reshape(size, mine)
                continue
            isz = self.compiled.itemsize
            copy = self.device.drv.Memcpy2D()
            copy.set_src_device(src)
            copy.src_pitch = mine * isz
            copy.set_dst_device(dst)
            copy.dst_x_in_bytes, copy.dst_pitch = first * isz, blocks * isz
            copy.width_in_bytes, copy.height = mine * isz, size
            copy(lane["stream"])

    def _combine(self, part: BatchPass, n: int, whole: dict) -> None:
        """The pass's reductions combined over the whole batch's partials, as one call does."""
        combined = self._combined()
        steps = [self.device.launcher(c.kernel, [whole[c.partials], combined[c]], self._blocks(c, n))
                 for c in self._combines_of(part)]
        if not self.gpu:
            for step in steps:
                step()
            return
        stream = self.lanes[0]["stream"]  # every lane is done: `_finish` waited for it
        self.device.on_own_stream(stream, in_order(steps))
        stream.synchronize()

    def _run_cpu(self, lane: dict, arrays, results, start: int, m: int, p: int | None, whole: dict) -> None:
        reads, gives, combines = self._pass_io(p)
        self._point(lane, m)
        for k in reads:
            lane["in"][k].array[...] = self._chunk_of(k, arrays[k], start, m)
        try:
            self.recorded(lane, m, p).replay()
            self._partials_of_chunk(lane, combines, whole, start, m)
        finally:
            for k in gives:
                self._chunk_of(k, results[k], start, m)[...] = lane["out"][k].array
            for slot in (*lane["in"].values(), *lane["out"].values()):
                slot.array = None
        self._done()

    def _done(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _transfer(self, host: np.ndarray, buf, start: int, m: int, stream, to_device: bool) -> None:
        """Chunk [start, start+m) of a page-locked caller's array to or from a lane's buffer
        (laid out for a batch of m): one contiguous copy for an array of structures, one row
        per word for a structure of arrays."""
        drv, isz = self.device.drv, host.dtype.itemsize
        if self.layout == "aos":
            part = host[start:start + m]
            if to_device:
                drv.memcpy_htod_async(buf, part, stream)
            else:
                drv.memcpy_dtoh_async(part, buf, stream)
            return
        words, n = math.prod(host.shape[:-1]), host.shape[-1]
        copy = drv.Memcpy2D()
        if to_device:
            copy.set_src_host(host)
            copy.src_x_in_bytes, copy.src_pitch = start * isz, n * isz
            copy.set_dst_device(buf)
            copy.dst_pitch = m * isz
        else:
            copy.set_src_device(buf)
            copy.src_pitch = m * isz
            copy.set_dst_host(host)
            copy.dst_x_in_bytes, copy.dst_pitch = start * isz, n * isz
        copy.width_in_bytes, copy.height = m * isz, words
        copy(stream)

    def _staged(self, lane: dict, key: str, m: int) -> np.ndarray:
        """The part of lane's page-locked buffer `key` (an input's name, or `OUTPUT_KEY` and an
        output's) that holds a chunk of m elements."""
        shape = self._shape(key.removeprefix(OUTPUT_KEY), m)
        return self._staging(lane)[key].reshape(-1)[: math.prod(shape)].reshape(shape)

    def _issue_gpu(self, lane: dict, arrays, results, start: int, m: int, p: int | None, whole: dict) -> None:
        """Queues a chunk of pass p on the lane's stream: arrays whose pages are locked go
        straight to and from the device (the stream orders them after the lane's previous
        chunk), the others through the lane's page-locked buffers, which the host may only
        refill once the lane's previous chunk is done with them."""
        if lane.get("staging_busy") or (self.progress is not None and lane["pending"] is not None):
            self._finish(lane, results)
        reads, gives, combines = self._pass_io(p)
        drv, stream = self.device.drv, lane["stream"]
        staged_any = False
        for k in reads:
            if self.locked[k]:
                self._transfer(arrays[k], lane["buffers"][k], start, m, stream, True)
            else:
                staged = self._staged(lane, k, m)
                _copy(staged, self._chunk_of(k, arrays[k], start, m))
                drv.memcpy_htod_async(lane["buffers"][k], staged, stream)
                staged_any = True
        self._point(lane, m)
        self.device.on_own_stream(stream, self.recorded(lane, m, p).replay)
        self._partials_of_chunk(lane, combines, whole, start, m)
        for k in gives:
            if self.locked[OUTPUT_KEY + k]:
                self._transfer(results[k], lane["buffers"][OUTPUT_KEY + k], start, m, stream, False)
            else:
                drv.memcpy_dtoh_async(self._staged(lane, OUTPUT_KEY + k, m), lane["buffers"][OUTPUT_KEY + k], stream)
                staged_any = True
        lane["pending"] = (start, m, gives)
        lane["staging_busy"] = staged_any

    def _finish(self, lane: dict, results) -> None:
        """Waits for the lane's last chunk and copies its staged outputs out."""
        if not self.gpu or lane["pending"] is None:
            return
        start, m, gives = lane["pending"]
        lane["stream"].synchronize()
        for k in gives:
            if not self.locked[OUTPUT_KEY + k]:
                _copy(self._chunk_of(k, results[k], start, m), self._staged(lane, OUTPUT_KEY + k, m))
        lane["pending"] = None
        lane["staging_busy"] = False
        self._done()
