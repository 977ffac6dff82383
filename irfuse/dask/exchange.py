"""The shared-node exchange of a time loop on a parted mesh (`irfuse.dask.parts.time_loop`):
after each step, every part sends the rows of the owned nodes other parts read (`Part.sends`,
one packed block per value) and sets its ghost rows to its owners' (`Part.reads`, picked
from the owners' blocks by `Part.picks`). Rows are copied, never added: the bits do not
depend on how parts are spread over workers.

Two ways between workers (parts of one worker read each other's blocks directly):

- **shared** (workers on one host): each part packs into two buffers of its own, used by
  step parity, that the other workers map: files in a directory of shared memory for host
  arrays, GPU buffers opened through CUDA IPC for CuPy arrays (a worker reads its neighbour's
  buffer over the GPUs' link). A file of two counters per worker orders the steps: `packed`
  (the last step whose packs the worker has made, or on the GPU queued with an event after
  them) and `pulled` (the last step whose ghost rows it has read, or queued so). At step k a
  worker packs parity k % 2 once the workers reading from it pulled step k - 2 (whose
  buffer that was), then reads its ghost rows once their owners packed step k. On the GPU the
  waits are the host's only for the other host's queueing: the streams wait for each other
  through interprocess events, so no host waits for its GPU and the kernels of step k + 1
  are queued while those of step k run.
- **dask**: packs travel through `distributed.Queue`s, one per (owner, reader) pair, as
  host arrays: any cluster, a scheduler round trip (milliseconds) per step.

The shared buffers, events and mappings of a mesh are kept by each worker process from loop
to loop (`KEPT`, one set per kind of exchange: the values and their type), so that a loop
does not map its neighbours' buffers again; a step's marks follow the loop's number on the
mesh, so the counters go on from loop to loop. They are let go on every worker at once:
`PartedMesh.close()`, a loop that failed (the next one makes new ones), or a mesh whose
directory is gone (collected without `close`).

A worker that fails writes the loop's number into its row of failures (the others raise
instead of waiting); one that is lost is waited for `timeout` seconds.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from contextlib import contextmanager

import numpy as np

from irfuse.artifact.records import record
from irfuse.diagnostics import ExecutionError

READY = 1
PACKED, PULLED, FAILED_ROW = 0, 1, 2  # the rows of the counters' file (failed: the loop's number)
LOOP_SHIFT = 32  # a step's mark: (loop << LOOP_SHIFT) + READY + 1 + step
EVENT_DISABLE_TIMING, EVENT_INTERPROCESS = 0x2, 0x4  # cudaEventCreateWithFlags


class PeerFailed(ExecutionError):
    """Another worker of the loop failed (its own error is the one to report)."""


@record
class ExchangeSpec:
    token: str  # names this loop's queues
    directory: str | None  # the mesh's shared directory (None: through Dask queues)
    ranks: list  # worker addresses, in rank order
    rank_of_part: list[int]
    names: dict  # value name -> row shape: the nodal values exchanged
    dtype: str
    gpu: bool
    timeout: float
    loop: int = 1  # the loop's number on its mesh (the counters go on from loop to loop)

    @property
    def kind(self) -> str:
        """What this loop exchanges, which names its buffers: loops of the same kind on one
        mesh use the same buffers, opened once."""
        return hashlib.sha1(repr((sorted(self.names.items()), str(self.dtype), self.gpu)).encode()).hexdigest()[:12]


def shared_directory(workers: int) -> str:
    """A directory for a mesh's exchanges in memory-backed storage where the host has one
    (Linux: /dev/shm), with its counters' file (made by the client, before any worker
    opens it)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    directory = tempfile.mkdtemp(prefix="irfuse-exchange-", dir=base)
    np.memmap(os.path.join(directory, "counters"), np.int64, "w+", shape=(3, workers)).flush()
    return directory


# A worker process's open exchanges: (directory, rank, kind) -> SharedExchange. Kept from
# loop to loop on a mesh (opening one maps the others' buffers: milliseconds to tenths of a
# second on the GPU); dropped on every worker at once (`drop_exchanges`), never one by one, so
# that no worker keeps a mapping of buffers another has freed.
KEPT: dict = {}


def drop_exchanges(directory: str) -> int:
    """Release this process's exchanges of the mesh whose directory this is."""
    gone = [key for key in KEPT if key[0] == directory]
    for key in gone:
        KEPT.pop(key).release()
    return len(gone)


@contextmanager
def open_exchange(spec: ExchangeSpec, rank: int, parts: dict, reads: list):
    """The exchange of worker `rank`, holding `parts` (part number -> Part), for one loop;
    `reads`: every part's `Part.reads` (who reads from whom). Through shared memory, the one
    kept from an earlier loop of the same kind on the mesh, else a new one (kept)."""
    key = (spec.directory, rank, spec.kind)
    exchange = KEPT.get(key) if spec.directory is not None else None
    for gone in {k[0] for k in KEPT if not os.path.isdir(k[0])}:  # meshes collected without close()
        drop_exchanges(gone)
    try:
        if exchange is None:
            exchange = (SharedExchange if spec.directory is not None else QueueExchange)(spec, rank, parts, reads)
            exchange.open()
            if spec.directory is not None:
                KEPT[key] = exchange
        exchange.begin(spec)
        yield exchange
        exchange.close()  # (if the loop did not: waits for the readers of its last packs)
    except BaseException:
        if exchange is not None:
            exchange.fail(spec)
        raise
    finally:
        if exchange is not None:
            exchange.end()


_FILL_ROWS = []


def set_ghost_rows(a, where, source, picks) -> None:
    """`a[where] = source[picks]` (rows): a part's ghost rows from an owner's pack, in place;
    on CuPy arrays one kernel, without the picked rows in between."""
    if isinstance(a, np.ndarray):
        a[where] = source[picks]
    elif len(where):
        import cupy

        width = a.size // max(a.shape[0], 1)
        _gpu_fill_rows()(source, cupy.asarray(picks), cupy.asarray(where), width, a, size=len(where) * width)


def _gpu_fill_rows():
    """One CuPy kernel setting dst's rows `where` to src's rows `picks` (rows of `width`
    words): a gather and a scatter, without the rows in between."""
    if not _FILL_ROWS:
        import cupy

        _FILL_ROWS.append(cupy.ElementwiseKernel(
            "raw T src, raw int64 picks, raw int64 where, int64 width", "raw T dst",
            "long long r = i / width, c = i % width; dst[where[r] * width + c] = src[picks[r] * width + c];",
            "irf_fill_rows"))
    return _FILL_ROWS[0]


class _Exchange:
    def __init__(self, spec: ExchangeSpec, rank: int, parts: dict, reads: list):
        self.spec, self.rank, self.parts = spec, rank, parts
        self._reader_parts = {q: [p for p, r in enumerate(reads) if q in r] for q in parts}
        if spec.gpu:
            import cupy

            self.xp = cupy
            self.index = {p: (cupy.asarray(part.sends), {q: (cupy.asarray(w), cupy.asarray(part.picks[q]))
                                                          for q, w in part.reads.items()})
                          for p, part in parts.items()}
        else:
            self.xp = np
            self.index = {p: (part.sends, {q: (w, part.picks[q]) for q, w in part.reads.items()})
                          for p, part in parts.items()}

    def _fill(self, values: dict, packs: dict, parity: int) -> None:
        """Each part's ghost rows from its owners' packs (`packs[q][name]`, per parity or not)."""
        for p, part in self.parts.items():
            for q, (where, picks) in self.index[p][1].items():
                for k, a in values[p].items():
                    source = packs[q][k]
                    set_ghost_rows(a, where, source[parity] if isinstance(source, tuple) else source, picks)

    def begin(self, spec: ExchangeSpec) -> None:
        self.spec = spec

    def fail(self, spec: ExchangeSpec) -> None:
        pass

    def end(self) -> None:
        pass

    def release(self) -> None:
        pass


class SharedExchange(_Exchange):
    """Packs in buffers every worker of the host maps (see the module)."""

    def open(self) -> None:
        spec = self.spec
        self.counters = np.memmap(self._path("counters"), np.int64, "r+", shape=(3, len(spec.ranks)))
        self.memory: list = []  # its GPU buffers, kept until released
        self.opened: list = []  # IPC pointers this worker opened
        self.events: list = []  # events this worker made or opened
        mine = {spec.rank_of_part[p] for p in self.parts}
        self.sources = sorted({spec.rank_of_part[q] for part in self.parts.values() for q in part.reads} - mine)
        self.readers = sorted({spec.rank_of_part[r] for q in self.parts for r in self._reader_parts[q]} - mine)
        self.own = {p: {k: tuple(self._buffer(p, k, shape, len(part.sends), b) for b in (0, 1))
                        for k, shape in spec.names.items()}
                    for p, part in self.parts.items() if len(part.sends)}
        if spec.gpu:  # after its packs and after its pulls, by parity: what the others wait for
            self.packed_event = tuple(self._event(f"packed.{self.rank}.{b}") for b in (0, 1))
            self.pulled_event = tuple(self._event(f"pulled.{self.rank}.{b}") for b in (0, 1))
        ready = (spec.loop << LOOP_SHIFT) + READY  # every worker's buffers made: map them
        self._publish(PACKED, ready)
        self._publish(PULLED, ready)
        self._wait(PACKED, self.sources + self.readers, ready)
        self.peers = dict(self.own)
        for part in self.parts.values():
            for q in part.reads:
                if q not in self.peers:
                    rows = 1 + max(int(r.picks[q].max()) for r in self.parts.values() if q in r.picks)
                    self.peers[q] = {k: tuple(self._mapped(q, k, shape, rows, b) for b in (0, 1))
                                     for k, shape in spec.names.items()}
        if spec.gpu:
            self.peer_packed = {r: tuple(self._opened_event(f"packed.{r}.{b}") for b in (0, 1)) for r in self.sources}
            self.peer_pulled = {r: tuple(self._opened_event(f"pulled.{r}.{b}") for b in (0, 1)) for r in self.readers}

    def begin(self, spec: ExchangeSpec) -> None:
        """A loop starts: its steps' marks follow the loop's number. (The last loop's close
        waited until every reader had read this worker's buffers.)"""
        self.spec, self.base = spec, (spec.loop << LOOP_SHIFT) + READY + 1
        self.last, self.closed = -1, False

    def _path(self, name: str) -> str:
        shared = name == "counters"
        return os.path.join(self.spec.directory, name if shared else f"{self.spec.kind}.{name}")

    def _buffer(self, p: int, name: str, shape: tuple, rows: int, parity: int):
        dtype = np.dtype(self.spec.dtype)
        path = self._path(f"{p}.{name}.{parity}")
        if not self.spec.gpu:
            return np.memmap(path, dtype, "w+", shape=(rows, *shape))
        import cupy

        memory = cupy.cuda.Memory(max(1, rows * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize))
        self.memory.append(memory)
        with open(path + ".ipc", "wb") as f:
            f.write(cupy.cuda.runtime.ipcGetMemHandle(memory.ptr))
        return cupy.ndarray((rows, *shape), dtype, cupy.cuda.MemoryPointer(memory, 0))

    def _mapped(self, q: int, name: str, shape: tuple, rows: int, parity: int):
        """Part q's buffer, which another worker made; the rows this worker's parts pick from
        it lie within the first `rows`."""
        dtype = np.dtype(self.spec.dtype)
        path = self._path(f"{q}.{name}.{parity}")
        if not self.spec.gpu:
            full = os.path.getsize(path) // (dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
            return np.memmap(path, dtype, "r", shape=(full, *shape))
        import cupy

        with open(path + ".ipc", "rb") as f:
            ptr = cupy.cuda.runtime.ipcOpenMemHandle(f.read())
        self.opened.append(ptr)
        nbytes = rows * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        memory = cupy.cuda.UnownedMemory(ptr, nbytes, self, cupy.cuda.Device().id)
        return cupy.ndarray((rows, *shape), dtype, cupy.cuda.MemoryPointer(memory, 0))

    def _event(self, name: str) -> int:
        import cupy

        runtime = cupy.cuda.runtime
        event = runtime.eventCreateWithFlags(EVENT_INTERPROCESS | EVENT_DISABLE_TIMING)
        self.events.append(event)
        with open(self._path(name + ".ipc"), "wb") as f:
            f.write(runtime.ipcGetEventHandle(event))
        return event

    def _opened_event(self, name: str) -> int:
        import cupy

        with open(self._path(name + ".ipc"), "rb") as f:
            event = cupy.cuda.runtime.ipcOpenEventHandle(f.read())
        self.events.append(event)
        return event

    def _publish(self, which: int, value: int) -> None:
        self.counters[which, self.rank] = value

    def _wait(self, which: int, ranks: list, value: int) -> None:
        """Until every one of `ranks` has its counter `which` at `value` or past it."""
        deadline = time.monotonic() + self.spec.timeout
        for r in ranks:
            spins = 0
            while self.counters[which, r] < value:
                if self.counters[FAILED_ROW, r] == self.spec.loop:
                    raise PeerFailed(f"time loop: worker {self.spec.ranks[r]} failed; worker "
                                     f"{self.spec.ranks[self.rank]} stops")
                spins += 1
                if spins > 10000:  # a long wait: stop spinning hot, look at the clock
                    if time.monotonic() > deadline:
                        raise ExecutionError(f"time loop: worker {self.spec.ranks[r]} gave no step for "
                                             f"{self.spec.timeout:g} s (timeout=); worker "
                                             f"{self.spec.ranks[self.rank]} stops")
                    time.sleep(2e-5)
                else:
                    time.sleep(0)

    def _stream_waits(self, events: dict, parity: int) -> None:
        if self.spec.gpu:
            stream = self.xp.cuda.get_current_stream().ptr
            for pair in events.values():
                self.xp.cuda.runtime.streamWaitEvent(stream, pair[parity])

    def _record(self, events: tuple, parity: int) -> None:
        if self.spec.gpu:
            self.xp.cuda.runtime.eventRecord(events[parity], self.xp.cuda.get_current_stream().ptr)

    def step(self, k: int, values: dict) -> None:
        parity, mark = k % 2, self.base + k
        if k >= 2:  # the readers are done with this parity's buffers (step k - 2)
            self._wait(PULLED, self.readers, mark - 2)
            self._stream_waits(getattr(self, "peer_pulled", {}), parity)
        for p, buffers in self.own.items():
            sends = self.index[p][0]
            for name, a in values[p].items():
                self.xp.take(a, sends, axis=0, out=buffers[name][parity])
        self._record(getattr(self, "packed_event", ()), parity)
        self._publish(PACKED, mark)
        self._wait(PACKED, self.sources, mark)
        self._stream_waits(getattr(self, "peer_packed", {}), parity)
        self._fill(values, self.peers, parity)
        self._record(getattr(self, "pulled_event", ()), parity)
        self._publish(PULLED, mark)
        self.last = k

    def close(self) -> None:
        """Wait until the readers read this worker's last packs and this worker's GPU read its
        own (then the buffers and events go)."""
        if self.closed:
            return
        self.closed = True
        if self.last >= 0:
            self._wait(PULLED, self.readers, self.base + self.last)
            self._stream_waits(getattr(self, "peer_pulled", {}), self.last % 2)
        if self.spec.gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def fail(self, spec: ExchangeSpec) -> None:
        counters = getattr(self, "counters", None)
        if counters is not None:
            counters[FAILED_ROW, self.rank] = spec.loop

    def end(self) -> None:
        if self.spec.gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def release(self) -> None:
        """Its buffers, events and mappings let go (every worker of the mesh at once)."""
        if self.spec.gpu:
            import cupy

            cupy.cuda.get_current_stream().synchronize()
            for ptr in getattr(self, "opened", ()):
                cupy.cuda.runtime.ipcCloseMemHandle(ptr)
            for event in getattr(self, "events", ()):
                cupy.cuda.runtime.eventDestroy(event)
        self.memory, self.opened, self.events = [], [], []


class QueueExchange(_Exchange):
    """Packs through `distributed.Queue`s (see the module)."""

    def open(self) -> None:
        import distributed

        self.client = distributed.get_client()
        mine = set(self.parts)
        self.outbox = {(q, p): distributed.Queue(f"irfuse-{self.spec.token}-{q}-{p}", client=self.client)
                       for q in self.parts for p in self._reader_parts[q] if p not in mine}
        self.inbox = {(q, p): distributed.Queue(f"irfuse-{self.spec.token}-{q}-{p}", client=self.client)
                      for p, part in self.parts.items() for q in part.reads if q not in mine}

    def step(self, k: int, values: dict) -> None:
        packs = {q: {name: a[self.index[q][0]] for name, a in values[q].items()} for q in self.parts}
        host = {q: {name: b.get() if self.spec.gpu else b for name, b in pack.items()} for q, pack in packs.items()}
        for (q, _), queue in self.outbox.items():
            queue.put(host[q])
        for (q, p), queue in self.inbox.items():
            try:
                got = queue.get(timeout=self.spec.timeout)
            except Exception as e:  # a timeout, or the cluster going away
                raise PeerFailed(f"time loop: no step {k} values of part {q} for part {p} within "
                                     f"{self.spec.timeout:g} s (timeout=): {type(e).__name__}") from None
            packs.setdefault(q, {})
            packs[q] = {name: self.xp.asarray(b) for name, b in got.items()}
        self._fill(values, packs, 0)

    def close(self) -> None:
        pass

    def end(self) -> None:
        for queue in {**getattr(self, "outbox", {}), **getattr(self, "inbox", {})}.values():
            queue.close()
        self.outbox, self.inbox = {}, {}
