"""Running a plan on an NVIDIA GPU through PyCUDA.

pycuda is imported only here, when the CUDA backend is asked for.  The
artifact's cubin for this GPU's architecture (`Artifact.cubin_for`) is loaded with
`module_from_buffer`; kernels needing more than 48 KB of shared memory get
their dynamic limit raised first.  Timing uses CUDA events.  A recorded run (its
launches and copies) is captured into one CUDA graph (`cuda_graph`) and replayed
with one launch.
"""

from __future__ import annotations

import functools
import struct
import sys
import threading
import weakref

import numpy as np

from irfuse.artifact.artifact import Artifact, KernelResources
from irfuse.diagnostics import ExecutionError, NotCapturable
from irfuse.runtime.cuda_graph import CudaGraph, OwnStream, checked, cuda_driver, stream_capturing
from irfuse.runtime.dependent_launch import DependentLaunch, LaunchRecord
from irfuse.runtime.device import Slot, in_order

CONSTANTS_KEPT = 256  # uniform values given on the host kept on the device (`CudaDevice.constant`)
SCALAR_WORDS = 256  # values of uniform scalars given as numbers that captured graphs may read (`CudaDevice.scalar`)
# A scalar's bytes (float32 or float64) as the 32-bit words a memset writes, little-endian.
_WORDS = {4: struct.Struct("<I").unpack, 8: struct.Struct("<2I").unpack}


class GpuUnavailable(ExecutionError):
    """No usable GPU: pycuda missing, no driver, or no device."""


def import_pycuda():
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise GpuUnavailable(f"the CUDA backend needs pycuda (pip install 'irfuse[gpu]'): {e}") from None
    try:
        drv.init()
        if drv.Device.count() == 0:
            raise GpuUnavailable("the CUDA backend found no GPU (the driver reports 0 devices)")
    except drv.Error as e:
        raise GpuUnavailable(f"the CUDA backend found no usable GPU or driver: {e}") from None
    return drv


def current_arch(device_index: int = 0) -> str:
    """The architecture of GPU `device_index` (`sm_90`): what its cubin is compiled for."""
    drv = import_pycuda()
    major, minor = drv.Device(device_index).compute_capability()
    return f"sm_{major}{minor}"


def device_memory(drv, nbytes: int):
    """`drv.mem_alloc(nbytes)`, irfuse's own memory on the current GPU. Where the GPU has no
    room, the caller's array libraries may be holding it unused (PyTorch's caching allocator and
    CuPy's memory pool keep what their arrays let go of, which the driver cannot give irfuse):
    their cached blocks are handed back and the allocation tried once more, as PyTorch does for
    its own. Still no room: an `ExecutionError` saying how much was asked and what is free."""
    try:
        return drv.mem_alloc(nbytes)
    except getattr(drv, "MemoryError", MemoryError):
        handed = _hand_back_cached_blocks()
        try:
            return drv.mem_alloc(nbytes)
        except getattr(drv, "MemoryError", MemoryError):
            free, total = drv.mem_get_info()
            raise ExecutionError(f"the GPU has no room for {nbytes:,} bytes of irfuse's own (its arrays' "
                                 f"intermediate rows, scratch or copies): {free:,} of {total:,} bytes free"
                                 + (f" after {', '.join(handed)} handed back their cached blocks" if handed else "")
                                 + "; a smaller batch or mesh, or fewer arrays kept on the GPU, leaves room") from None


def _hand_back_cached_blocks() -> list[str]:
    """Frees the blocks PyTorch's caching allocator and CuPy's default pool hold unused, where
    the caller has imported them (irfuse imports neither for this); the names of those freed."""
    handed = []
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
        handed.append("PyTorch")
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        handed.append("CuPy")
    return handed


def gpu_available() -> bool:
    try:
        import_pycuda()
        return True
    except GpuUnavailable:
        return False


class _EventTimer:
    def __init__(self, drv):
        self.drv = drv

    def __enter__(self):
        self.start, self.stop = self.drv.Event(), self.drv.Event()
        self.start.record()
        return self

    def __exit__(self, *exc):
        self.stop.record()
        self.stop.synchronize()
        self.seconds = self.stop.time_since(self.start) / 1e3


_this_thread = threading.local()

# Device index -> PyCUDA's context object of that GPU's primary context, one for the process.
# PyCUDA marks every object with the context object current where it was made and frees it only
# where that object is current again, or in the thread that made the context object: with one
# per device (and programs using devices from several threads: the main one, a framework's),
# an object made under one could not be freed under another at exit.
_PRIMARY: dict[int, object] = {}
_PRIMARY_LOCK = threading.Lock()


def primary_context(drv, index: int = 0):
    """The process's one PyCUDA context object of GPU `index`'s primary context."""
    with _PRIMARY_LOCK:
        made = _PRIMARY.get(index)
        if made is None:
            made = _PRIMARY[index] = drv.Device(index).retain_primary_context()
        return made


class _PopAtThreadExit:
    """Held by a thread that pushed a device's context: when the thread ends, its objects are
    released in it, and this pops the context there (PyCUDA aborts the process when a thread
    ends with a context on its stack: a Dask worker's task thread, a thread pool's)."""

    def __init__(self, device: "CudaDevice"):
        self.device = weakref.ref(device)

    def __del__(self):
        device = self.device()
        if device is not None:
            device.release_thread()


class CudaDevice:
    name = "cuda"
    # A reducing kernel's last block may combine its partials (`KernelInfo.finish_parts`).
    finishes_in_kernel = True
    # An element kernel adds a scatter's rows into the nodes itself under atomics.
    atomics_in_kernel = True

    def __init__(self, plan: Artifact, device_index: int = 0, graphs: bool = True):
        """`graphs=False` replays recorded runs launch by launch (for comparisons)."""
        drv = import_pycuda()
        self.drv = drv
        self.dev = drv.Device(device_index)
        self.ordinal = device_index  # (the GPU's number, as PyTorch and CUDA count them)
        self.context = primary_context(drv, device_index)
        self._threads: set[int] = set()  # threads that have the context pushed
        self.make_current()
        self.gpu_name = self.dev.name()
        cc = self.dev.compute_capability()
        arch = f"sm_{cc[0]}{cc[1]}"
        self.arch = arch
        cubin = plan.cubin_for(arch)  # the artifact's binary for this GPU (the compiler's side makes it)
        self.plan = plan
        self.dtype = plan.element.numpy
        # Each cubin image a module (the program's kernels compiled apart: `CubinResult.parts`).
        self.images = cubin.parts()
        self.modules = [drv.module_from_buffer(image) for image, _ in self.images]
        self.image_of = {k.name: next(i for i, (_, names) in enumerate(self.images) if names is None or k.name in names)
                         for k in plan.kernels}
        # Per kernel: what ptxas reported, or the driver where the report left a kernel out.
        self.resources: dict[str, KernelResources] = dict(cubin.resources)
        self.functions = {}
        self.shared = {}
        limit = self.dev.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        for k in plan.kernels:
            fn = self.modules[self.image_of[k.name]].get_function(k.name)
            dynamic = k.dynamic_shared_bytes(plan.itemsize)
            if dynamic > limit:
                raise ExecutionError(f"kernel {k.name} needs {dynamic} bytes of shared memory; "
                                   f"{self.gpu_name} allows {limit} per block")
            if dynamic > 48 * 1024:
                fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic)
            self.functions[k.name] = fn
            self.shared[k.name] = dynamic
            if k.name not in self.resources:
                # Some NVRTC builds (13.0) leave ptxas' report out of the log: ask the driver instead.
                self.resources[k.name] = KernelResources(
                    registers=fn.num_regs, shared_bytes=fn.shared_size_bytes, stack_bytes=fn.local_size_bytes)
        self.allocations = []
        self.sizes: dict[int, int] = {}
        self.use_graphs = graphs
        self.graphs: list[CudaGraph] = []
        # Where launches and copies go: the default stream, or a capture stream while a
        # graph is recorded, or irfuse's own stream ordered after a caller's (`on_stream`).
        self._stream = None
        self._ordering = None  # (stream, event, event) of `on_stream`, made on first use
        self._captured: list | None = None  # launches recorded while a graph is captured (`capture`)
        # Kernels captured into a graph after another kernel are launched as programmatic
        # dependent launches (sm_90 and newer), so the graph holds programmatic edges: a kernel's
        # blocks are scheduled while the one before it finishes, and wait for it (every irfuse
        # kernel starts with irf_after_previous_grid()) before touching global memory. False
        # (a benchmark's comparison): plain launches.
        self.graph_dependent_launches = self.dependent_launches
        self._after_kernel = False  # the last step captured was a kernel launch
        self._kept: list = []  # dependent launches captured: their parameters outlive the capture call
        self._bindings_modules: dict[int, object] = {}  # images loaded through cuda-bindings (`dependent_launch`)
        self._bindings_functions: dict[str, object] = {}
        self._constants: dict[tuple, object] = {}  # small host values uploaded once (`constant`)
        # Uniform scalars given on the host (`scalar`): (input, stream) -> [buffer, address, bits written].
        self._scalars: dict[tuple, list] = {}
        driver = cuda_driver()
        self._memset = (driver.cuMemsetD32Async, driver.CUresult.CUDA_SUCCESS)  # (bound once: `_set_words`)
        self._scalar_pool = None  # words for captured calls' scalars (`scalar`), made with the first word
        self._loop_stream: OwnStream | None = None  # (`loop_stream`)
        self._valued: dict[bytes, int] = {}  # value -> its word in the pool
        self._capture, self._captured_words = None, set()  # the capture the pool's words were last written in
        self._streams: dict[int, object] = {}  # CUstream objects of callers' handles, made once
        self._direct: int | None = None  # a capturing caller's stream the launches go onto (`on_stream`)
        # While a graph launched on a caller's stream is captured (a staged call's passes):
        # that stream, whose scalar words the graph reads, written before each launch (`scalar`),
        # and the device whose words those are: one device's words for every pass of the graph,
        # so a number read by several passes is one word and one memset a launch.
        self.scalar_words_of: int | None = None
        self.words_owner: "CudaDevice | None" = None

    def make_current(self) -> None:
        """Makes the context current in the calling thread: pushed on the thread's first use
        (PyCUDA keeps a stack per thread), popped when the device closes in that thread or
        when the thread ends."""
        thread = threading.get_ident()
        if thread in self._threads:
            return
        self.context.push()
        self._threads.add(thread)
        guards = getattr(_this_thread, "guards", None)
        if guards is None:
            guards = _this_thread.guards = {}
        # One guard a device and thread: a thread that pushes again after `release_thread` (a
        # framework's, call after call) does not add guards without end.
        guard = guards.get(id(self))
        if guard is None or guard.device() is not self:
            guards[id(self)] = _PopAtThreadExit(self)

    def release_thread(self) -> None:
        """Pops the context in the calling thread if it pushed it."""
        thread = threading.get_ident()
        if thread in self._threads:
            self._threads.discard(thread)
            self.context.pop()

    def close(self) -> None:
        # The context object on top of the calling thread's stack while the device's objects
        # are freed (`primary_context`): this may run in another thread than the one that made
        # them (a framework's thread made them, the main one closes at exit).
        self.context.push()
        try:
            for g in self.graphs:
                g.destroy()
            self.graphs.clear()
            for a in self.allocations:
                a.free()
            self.allocations.clear()
            if self._loop_stream is not None:
                self._loop_stream.destroy()
                self._loop_stream = None
            if self._ordering is not None:
                cu = cuda_driver()
                for event in self._ordering[1:]:
                    cu.cuEventDestroy(event)
                self._ordering = None
            for module in self._bindings_modules.values():
                cuda_driver().cuModuleUnload(module)
            self._bindings_modules.clear()
            self._bindings_functions.clear()
            self.functions.clear()
            self.modules = []
        finally:
            self.drv.Context.pop()  # (PyCUDA pops the top of the stack: the push above)
        self.release_thread()  # other threads pop theirs when they end

    def mem_alloc(self, nbytes: int):
        """Device memory of irfuse's own, freed by the caller (`device_memory`)."""
        return device_memory(self.drv, nbytes)

    def _listed(self, nbytes: int):
        """`mem_alloc`'s memory listed with the device's arrays (its size known, freed with them)."""
        buf = self.mem_alloc(nbytes)
        self.allocations.append(buf)
        self.sizes[int(buf)] = nbytes
        return buf

    def alloc(self, shape):
        nbytes = max(int(np.prod(shape)) * np.dtype(self.dtype).itemsize, 1)
        buf = self._listed(nbytes)
        # All-ones bytes are NaN: an element no kernel writes shows as NaN.
        self.drv.memset_d8(buf, 0xFF, nbytes)
        return buf

    def upload(self, a):
        a = np.ascontiguousarray(a, dtype=self.dtype)
        buf = self.alloc(a.shape)
        self.drv.memcpy_htod(buf, a)
        return buf

    def has_constant(self, a, integers: bool = False) -> bool:
        """Whether `constant` holds this value already (and will not upload it)."""
        a = np.ascontiguousarray(a, dtype=np.int64 if integers else self.dtype)
        return (a.dtype.str, a.shape, a.tobytes()) in self._constants

    def constant(self, a, integers: bool = False):
        """A device copy of a small host array (a uniform value given on the host; with
        `integers`, int64 words), uploaded once per value and never written again: work queued
        on a stream may still read it. Past CONSTANTS_KEPT values the device is synchronized
        and the copies let go."""
        a = np.ascontiguousarray(a, dtype=np.int64 if integers else self.dtype)
        key = (a.dtype.str, a.shape, a.tobytes())
        buf = self._constants.get(key)
        if buf is None:
            if len(self._constants) >= CONSTANTS_KEPT:
                self.synchronize()
                kept = {int(b) for b in self._constants.values()}
                for b in self._constants.values():
                    b.free()
                self.allocations = [b for b in self.allocations if int(b) not in kept]
                self._constants.clear()
            buf = self._constants[key] = self.upload_integers(a) if integers else self.upload(a)
        return buf

    def scalar(self, name: str, bits: bytes, handle: int, capturing: bool | None = None) -> int:
        """The address of a device word holding `bits` (uniform scalar input `name`, given on
        the host, in this device's element type), written in the order of the caller's stream
        `handle` by 32-bit memsets: no copy from the host, no wait, so a time step that changes
        at every call costs one or two memsets and one that does not change costs nothing.
        Each stream has its own word (calls on two streams do not race). A graph to be
        launched on a caller's stream (`scalar_words_of`) reads that stream's word (of the
        device `words_owner`, where set: one word for every pass of a staged call's graph),
        which the launch writes first. Any other call captured into a graph (`stream_capturing`: no
        memory may be allocated then) takes a word that holds this value for every graph that
        reads it (`SCALAR_WORDS` of them, allocated with the first word), the memset captured
        with it. `capturing`: whether the stream is being captured, where the caller knows
        (else asked)."""
        stream = self._streams.get(handle)
        if stream is None:
            stream = self._streams[handle] = cuda_driver().CUstream(handle)
        if capturing if capturing is not None else stream_capturing(handle):
            if self.scalar_words_of is not None:  # (a graph launched on that stream: its words)
                place = (self.words_owner or self)._scalars.get((name, self.scalar_words_of))
                if place is None:
                    raise NotCapturable(f"uniform scalar '{name}' has no word for the stream the graph is for")
                return place[1]
            ptr = self._valued.get(bits)
            if ptr is None:
                if self._scalar_pool is None or len(self._valued) >= SCALAR_WORDS:
                    raise NotCapturable(
                        f"uniform scalar '{name}' given as a number needs a word of its own for this value in a "
                        "captured graph, and " + ("none was made before the capture (make one call with a number "
                                                  "outside it first)" if self._scalar_pool is None else
                                                  f"all {SCALAR_WORDS} hold other values")
                        + ": pass it as a GPU array")
                ptr = self._valued[bits] = int(self._scalar_pool) + 16 * len(self._valued)
            # One memset a word and capture: the graph's later reads follow it (a time loop's
            # steps read the same values).
            capture = int(checked(cuda_driver().cuStreamGetCaptureInfo(stream), "cuStreamGetCaptureInfo")[1])
            if capture != self._capture:
                self._capture, self._captured_words = capture, set()
            if ptr not in self._captured_words:
                self._set_words(ptr, bits, stream)
                self._captured_words.add(ptr)
            return ptr
        # [the word's buffer, its address, the bits it was last set to]: a changing number is
        # written at every call of a time loop, so this path reads no more than it must
        place = self._scalars.get((name, handle))
        if place is None:
            if self._scalar_pool is None:
                self._scalar_pool = self._listed(16 * SCALAR_WORDS)  # (16-byte aligned, as a uniform input is read)
            buf = self._listed(16)
            place = self._scalars[(name, handle)] = [buf, int(buf), None]
        if place[2] != bits:
            self._set_words(place[1], bits, stream)
            place[2] = bits
        return place[1]

    def _set_words(self, ptr: int, bits: bytes, stream) -> None:
        memset, success = self._memset
        for k, word in enumerate(_WORDS[len(bits)](bits)):
            (err,) = memset(ptr + 4 * k, word, 1, stream)
            if err != success:
                raise ExecutionError(f"cuMemsetD32Async failed: {err.name}")

    def upload_integers(self, a):
        a = np.ascontiguousarray(a)
        buf = self._listed(max(a.nbytes, 1))
        self.drv.memcpy_htod(buf, a)
        return buf

    def write(self, buf, a):
        """Host array `a` (this device's element type) into device buffer `buf`."""
        self.drv.memcpy_htod(buf, np.ascontiguousarray(a))

    def read_into(self, out, buf):
        """Device buffer `buf` into host array `out` (any strides)."""
        if out.flags.c_contiguous:
            self.drv.memcpy_dtoh(out, buf)
        else:
            out[...] = self.download(buf, out.shape)

    def download(self, buf, shape):
        out = np.empty(shape, dtype=self.dtype)
        self.drv.memcpy_dtoh(out, buf)
        return out

    def copy(self, dst, src):
        nbytes = dst.nbytes if isinstance(dst, Slot) else self.sizes[int(dst)]
        if self._direct is not None:
            cu = cuda_driver()
            checked(cu.cuMemcpyDtoDAsync(int(dst), int(src), nbytes, self._direct_stream()), "cuMemcpyDtoDAsync")
            return
        if self._captured is not None:
            self._captured.append(None)  # not a kernel launch
            self._after_kernel = False
        self.drv.memcpy_dtod_async(int(dst), int(src), nbytes, self._stream)

    def launcher(self, kernel, buffers, n):
        """A call that launches `kernel` on these buffers, with the argument format fixed once
        (PyCUDA's prepared call)."""
        k = next(k for k in self.plan.kernels if k.name == kernel)
        grid = k.blocks(n)
        if grid > 2**31 - 1:
            raise ExecutionError(f"batch of {n} elements needs {grid} blocks, over the grid limit")
        fn = self.functions[kernel]
        fn.prepare("P" * len(buffers) + "q")
        launch = functools.partial(fn.prepared_async_call, (grid, 1, 1), k.block_dims)
        shared = self.shared[kernel]
        self._bindings_function(kernel, shared)  # loaded now, not while a graph is captured
        slots = any(isinstance(b, Slot) for b in buffers)  # addresses read when it runs
        fixed = [int(b) for b in buffers] if not slots else None

        def run():
            pointers = fixed if fixed is not None else [int(b) for b in buffers]
            if self._direct is not None:
                record = LaunchRecord(kernel, grid, k.block_dims, shared, tuple(pointers), n)
                self._launch_direct(record, k.after_previous_grid)
                return
            if self._captured is not None:
                record = LaunchRecord(kernel, grid, k.block_dims, shared, tuple(pointers), n)
                self._captured.append(record if k.after_previous_grid else None)
                after_kernel, self._after_kernel = self._after_kernel, True
                if self.graph_dependent_launches and after_kernel and k.after_previous_grid:
                    dependent = self.dependent_launch(record)
                    dependent.launch_on(self._stream.handle)
                    self._kept.append(dependent)
                    return
            launch(self._stream, *pointers, n, shared_size=shared)
        return run

    def on_stream(self, handle: int, work) -> None:
        """Runs `work()` (launches and copies of this device) ordered on the caller's CUDA
        stream `handle`, without synchronizing anything else: on the legacy default stream
        (0) directly; on another stream, a stream of irfuse's own waits for the caller's
        work so far and the caller's stream for irfuse's (two events, cuda-bindings, as
        PyCUDA cannot take a stream it did not create)."""
        if handle == 0:
            self._stream = None
            work()
            return
        if stream_capturing(handle):
            # Captured (a time loop's graph, a caller's torch.cuda.graph): the launches go onto
            # the capturing stream itself, so the graph holds the calls' kernels as one chain,
            # each after a kernel as a programmatic dependent launch (`_launch_direct`), not
            # joined through another stream's events (about 1 us more between kernels,
            # measured on an H200: benchmarks/loop_trace.py).
            self._direct = handle
            try:
                work()
            finally:
                self._direct = None
            return
        cu = cuda_driver()
        if self._ordering is None:
            flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
            self._ordering = (self.drv.Stream(), checked(cu.cuEventCreate(flags), "cuEventCreate"),
                              checked(cu.cuEventCreate(flags), "cuEventCreate"))
        own, before, after = self._ordering
        theirs, mine = cu.CUstream(handle), cu.CUstream(own.handle)
        checked(cu.cuEventRecord(before, theirs), "cuEventRecord")
        checked(cu.cuStreamWaitEvent(mine, before, 0), "cuStreamWaitEvent")
        self._stream = own
        try:
            work()
        finally:
            self._stream = None
        checked(cu.cuEventRecord(after, mine), "cuEventRecord")
        checked(cu.cuStreamWaitEvent(theirs, after, 0), "cuStreamWaitEvent")

    def loop_stream(self) -> OwnStream:
        """A stream of irfuse's own on which `irfuse.time_loop` runs and captures its steps
        (one a device, made on first use): the same stream at every loop, so the words and
        arrays its calls keep by stream are made once."""
        if self._loop_stream is None:
            self._loop_stream = OwnStream()
        return self._loop_stream

    def on_own_stream(self, stream, work) -> None:
        """Runs `work()` (launches and copies of this device) on `stream`, a PyCUDA stream of
        irfuse's own (the chunks of a streamed batch)."""
        self._stream = stream
        try:
            work()
        finally:
            self._stream = None

    def batch(self, steps):
        """One call that runs `steps` (launches and copies of this device) in order: a CUDA
        graph captured from them, submitted with one launch."""
        if not self.use_graphs or not steps:
            return in_order(steps)
        graph = self.capture(in_order(steps))
        self.graphs.append(graph)
        return graph

    def capture(self, work, launches: list | None = None) -> CudaGraph:
        """`work()` (launches and copies of this device, with the addresses they have now)
        captured into a CUDA graph; the caller destroys it (`CudaGraph.destroy`). `launches`,
        if given, receives a `LaunchRecord` per launch of a kernel that waits for the previous
        grid, and None per other step."""
        def record(stream):
            self._stream, self._captured = stream, (launches if launches is not None else [])
            self._after_kernel = False
            try:
                work()
            finally:
                self._stream, self._captured = None, None
                self._after_kernel = False

        try:
            return CudaGraph(self.drv, record)
        finally:
            self._kept.clear()

    @property
    def peak_memory_bytes_per_s(self) -> float:
        """Device memory's peak rate (bytes read plus written a second: double data rate at the
        memory clock over the bus width), above what any kernel reaches there."""
        a = self.drv.device_attribute
        return 2 * self.dev.get_attribute(a.MEMORY_CLOCK_RATE) * 1e3 * self.dev.get_attribute(a.GLOBAL_MEMORY_BUS_WIDTH) / 8

    @property
    def dependent_launches(self) -> bool:
        """Whether this GPU takes programmatic dependent launches (sm_90 and newer)."""
        return self.dev.compute_capability() >= (9, 0)

    def dependent_launch(self, record: LaunchRecord) -> DependentLaunch:
        """`record`'s launch as a programmatic dependent launch (`runtime.dependent_launch`)."""
        return DependentLaunch(self._bindings_function(record.kernel, record.shared_bytes), record)

    def _direct_stream(self):
        stream = self._streams.get(self._direct)
        if stream is None:
            stream = self._streams[self._direct] = cuda_driver().CUstream(self._direct)
        return stream

    def _launch_direct(self, record: LaunchRecord, after_previous_grid: bool) -> None:
        """`record`'s launch onto the capturing stream `_direct` (`on_stream`): programmatic
        where the kernel waits for the previous grid, the GPU takes it and every node the
        launch will follow in the capture is a kernel (a memset or copy before it takes a plain
        edge)."""
        programmatic = after_previous_grid and self.graph_dependent_launches and self._after_kernels()
        launch = DependentLaunch(self._bindings_function(record.kernel, record.shared_bytes), record, programmatic)
        launch.launch_on(self._direct)  # (the graph node keeps a copy of the parameters)

    def _after_kernels(self) -> bool:
        """Whether the nodes the next one captured on `_direct` follows are all kernels."""
        cu = cuda_driver()
        info = checked(cu.cuStreamGetCaptureInfo(self._direct_stream()), "cuStreamGetCaptureInfo")
        deps, count = info[3], info[-1]  # (status, id, graph, nodes, [edge data,] count)
        kernel = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        return count > 0 and all(checked(cu.cuGraphNodeGetType(d), "cuGraphNodeGetType") == kernel
                                 for d in deps[:count])

    def _bindings_function(self, kernel: str, shared_bytes: int):
        """The kernel's CUfunction through cuda-bindings, which PyCUDA does not give for
        cuLaunchKernelEx: its cubin image loaded again in the same context, once (before any
        capture that launches it: loading a module is not a stream operation)."""
        fn = self._bindings_functions.get(kernel)
        if fn is None:
            cu = cuda_driver()
            image = self.image_of[kernel]
            if image not in self._bindings_modules:
                self._bindings_modules[image] = checked(cu.cuModuleLoadData(self.images[image][0]), "cuModuleLoadData")
            fn = checked(cu.cuModuleGetFunction(self._bindings_modules[image], kernel.encode()), "cuModuleGetFunction")
            if shared_bytes > 48 * 1024:
                checked(cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes), "cuFuncSetAttribute")
            self._bindings_functions[kernel] = fn
        return fn

    def free_memory(self) -> int:
        """Bytes of device memory free now."""
        return self.drv.mem_get_info()[0]

    def synchronize(self):
        self.drv.Context.synchronize()

    def timer(self):
        return _EventTimer(self.drv)

    def copy_bandwidth(self, nbytes: int = 1 << 30, repeat: int = 20) -> float:
        return measure_copy_bandwidth(self.drv, nbytes, repeat)


class DeviceCopy:
    """Two device buffers of `nbytes`; times cudaMemcpy from one to the other, called
    directly: a copy captured in a CUDA graph runs slower (`benchmarks/NOTES.md`)."""

    def __init__(self, drv, nbytes: int):
        self.drv, self.nbytes = drv, nbytes
        self.src, self.dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
        drv.memset_d8(self.src, 1, nbytes)

    def copy(self) -> None:
        self.drv.memcpy_dtod_async(self.dst, self.src, self.nbytes)

    def time_once(self, back_to_back: int = 1, queued: bool = False) -> float:
        """Seconds per copy of one timing over `back_to_back` copies issued one after another.
        `queued`: one more copy goes first, so the timed ones already wait on the device when
        the timing starts (device time only, no host launch time inside)."""
        if queued:
            self.copy()
        with _EventTimer(self.drv) as t:
            for _ in range(back_to_back):
                self.copy()
        return t.seconds / back_to_back

    def free(self) -> None:
        self.src.free()
        self.dst.free()


def measure_copy_bandwidth(drv, nbytes: int = 1 << 30, repeat: int = 20, back_to_back: int = 1) -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written (each
    timing over `back_to_back` copies issued one after another). Device time only: the
    strictest limit, with no launch cost of any submission path inside."""
    c = DeviceCopy(drv, nbytes)
    try:
        for _ in range(3):
            c.copy()
        times = [c.time_once(back_to_back, queued=True) for _ in range(repeat)]
        return 2 * nbytes / float(np.median(times))
    finally:
        c.free()
