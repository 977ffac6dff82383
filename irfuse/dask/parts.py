"""A mesh in parts on a Dask cluster: each part's arrays kept by one worker (in its memory,
or on its GPU), programs applied part by part, and time loops whose parts exchange the
values of their shared nodes between steps.

    mesh = irfuse.dask.PartedMesh(conn, 4, client, gpu=True)  # irfuse.mesh.partition, placed
    outs = irfuse.dask.apply(residual, X, u, mesh, dN, lam, mu)   # the connectivity: the mesh
    r = mesh.assemble(outs.r)                                    # the one call's bits
    end = irfuse.dask.time_loop(step, 100, {"u": "u1", "v": "v1"}, X, u, v, m, mesh, dN, lam, mu, dt)

The parts are `irfuse.mesh.partition`'s: a part owns the nodes whose first element lies in
its range of elements and holds every element around them (its ghost elements, computed by
it and by their own part), so its ordered scatters give its owned nodes the whole mesh's sums
bit for bit, with nothing to combine. A `Parted` array is one block per part, kept by the
part's worker: a nodal one holds the part's nodes (owned and ghost, `Part.nodes`), a
per-element one the part's elements (`Part.elements`). Its ghost rows are always their
owners' values: after a part's call, the nodal outputs its ghost rows cannot be exact for (a
scatter's sums, and what nodal statements compute from them) are completed from their owners.
`assemble` puts the owned rows (and each part's own range of elements) into one array in
the mesh's numbering: a copy of values, no arithmetic, so the bits do not depend on the
number of parts or of workers. Nodes no element names belong to no part: they come out 0.

Parts go to workers in order, in contiguous groups (`workers=`, by default every worker of
the client, by address); a worker holds several parts when there are more parts than
workers. With `gpu=True` the blocks are CuPy arrays on each worker's GPU (device 0 of the
worker's process: `dask_cuda.LocalCUDACluster` gives each worker its GPU so) and each part's
connectivity an `irfuse.mesh.Connectivity` made on its worker, so calls are ordered on the
worker's stream and blocks never leave the GPU but through an exchange.

A time loop (`time_loop`) runs as one task per worker for all its steps: every step calls
the program on each of the worker's parts, sets the carried inputs to the outputs, and
exchanges the ghost rows of the carried nodal values that need it (`irfuse.dask.exchange`):
through memory every worker maps (files in shared memory, and GPU buffers through CUDA IPC)
when the workers share the client's host, else through Dask queues. One task per step would
cost a scheduler round trip of several milliseconds a step, as much as the step itself on a
large mesh. Not taken: programs that reduce over the elements or the nodes (a part's ghost
elements would count twice) and programs over two connectivities.
"""

from __future__ import annotations

import numbers
import shutil
import socket
import time
import uuid
import weakref

import numpy as np

from irfuse.api.arguments import bind_inputs
from irfuse.api.outputs import Outputs
from irfuse.diagnostics import ExecutionError, UsageError, refuse_grad
from irfuse.mesh.connectivity import Connectivity
from irfuse.mesh.partitions import Part, partition

NODAL, ELEMENTS = "nodal", "elements"


class PerPart(list):
    """One value for each part (a future on the part's worker): an input's blocks, told apart
    from a uniform value given as a list, which every part takes whole."""


class Parted:
    """One block per part of `mesh`, kept by the part's worker (distributed futures): the
    rows of the part's nodes (`kind` "nodal") or of its elements ("elements")."""

    def __init__(self, mesh: "PartedMesh", kind: str, blocks: list):
        self.mesh, self.kind, self.blocks = mesh, kind, blocks

    def __repr__(self) -> str:
        return f"<Parted {self.kind} array: {len(self.blocks)} parts on {len(set(self.mesh.worker_of))} workers>"


class PartedMesh:
    """`conn` (E, K) cut by `irfuse.mesh.partition(conn, parts, nodes)`, each part's
    connectivity placed on its worker (see the module). `client`: a `distributed.Client`
    (by default the current one); `workers`: the worker addresses to use, in order."""

    def __init__(self, conn, parts, client=None, *, nodes: int | None = None, workers=None, gpu: bool = False):
        import distributed

        self.client = client if client is not None else distributed.get_client()
        if not isinstance(self.client, distributed.Client):
            raise UsageError(f"PartedMesh: client= is a distributed.Client, not a {type(client).__qualname__}")
        if not isinstance(gpu, bool):
            raise UsageError(f"PartedMesh: gpu= is True or False, not {gpu!r}")
        if workers is not None and (not isinstance(workers, (list, tuple))
                                    or not all(isinstance(w, str) for w in workers)):
            raise UsageError(f"PartedMesh: workers= is a list of the addresses of workers of the client's cluster, "
                             f"not {workers!r}")
        conn = _host(conn, "PartedMesh: conn")
        self.parts: list[Part] = partition(conn, parts, nodes)
        self.elements = conn.shape[0]
        self.nodes = int(nodes) if nodes is not None else int(conn.max()) + 1
        known = cluster_workers(self.client)
        self.workers = list(workers) if workers is not None else known
        unknown = [w for w in self.workers if w not in known]
        if not self.workers or unknown:
            raise UsageError(f"PartedMesh: workers= names workers of the client's cluster ({', '.join(known)}), not "
                             f"{', '.join(map(str, unknown)) or 'none'}")
        self.gpu = gpu
        self._hosts: dict | None = None
        self._directory: str | None = None  # (see _exchange_directory)
        self._loops = 0  # time loops run on it: each loop's number goes into its exchange's marks
        count = len(self.parts)
        self.worker_of = [self.workers[p * len(self.workers) // count] for p in range(count)]
        self._part = [self._place(p, part) for p, part in enumerate(self.parts)]
        self.connectivity = [self._submit(p, _prepared, self._place(p, part.conn), len(part.nodes))
                             for p, part in enumerate(self.parts)]

    def __repr__(self) -> str:
        workers = len(set(getattr(self, "worker_of", ())))  # (none yet where the constructor refused)
        return (f"<PartedMesh: {self.elements} elements, {self.nodes} nodes in {len(self.parts)} parts on "
                f"{workers} workers{' (GPU)' if getattr(self, 'gpu', False) else ''}>")

    def _place(self, p: int, value):
        (future,) = self.client.scatter([value], workers=[self.worker_of[p]], direct=True, hash=False)
        return future

    def _submit(self, p: int, fn, *args):
        return self.client.submit(fn, *args, workers=[self.worker_of[p]], allow_other_workers=False, pure=False)

    def nodal(self, values) -> Parted:
        """A nodal array (M, ...) as each part's rows: from a NumPy or CuPy array, each part's
        rows sent to its worker; from a Dask array, computed there; or `values(nodes)`, called
        on each part's worker with the part's global node numbers, giving its rows (the whole
        array then never exists)."""
        return self._parted(NODAL, values, self.nodes, lambda part: part.nodes)

    def per_element(self, values) -> Parted:
        """A per-element array (E, ...) as each part's rows (its own elements and its ghost
        ones); or `values(elements)` called on each part's worker with its element numbers."""
        return self._parted(ELEMENTS, values, self.elements, lambda part: part.elements)

    def _parted(self, kind: str, values, length: int, rows) -> Parted:
        if callable(values) and not hasattr(values, "shape"):
            blocks = [self._submit(p, _made_on_worker, values, self._part[p], kind, self.gpu)
                      for p in range(len(self.parts))]
            return Parted(self, kind, blocks)
        if hasattr(values, "dask") and hasattr(values, "chunks"):  # a Dask array: each part's rows where it runs
            _check_rows(values, kind, length)
            blocks = [self.client.compute(values[rows(part)], workers=[self.worker_of[p]],
                                          allow_other_workers=False) for p, part in enumerate(self.parts)]
            return Parted(self, kind, [self._submit(p, _on_device, b, self.gpu) for p, b in enumerate(blocks)])
        a = _check_rows(_host(values, f"a {kind} array"), kind, length)
        blocks = [self._submit(p, _on_device, self._place(p, np.ascontiguousarray(a[rows(part)])), self.gpu)
                  for p, part in enumerate(self.parts)]
        return Parted(self, kind, blocks)

    def assemble(self, parted: Parted) -> np.ndarray:
        """The whole array in the mesh's numbering, in host memory: each node's row from the
        part that owns it, each element's from the part whose range holds it."""
        if not isinstance(parted, Parted) or parted.mesh is not self:
            raise UsageError(f"assemble takes a Parted array of this mesh, not {type(parted).__qualname__}")
        nodal = parted.kind == NODAL
        mine = [self._submit(p, _own_rows, block, self._part[p], nodal) for p, block in enumerate(parted.blocks)]
        rows = self.client.gather(mine)
        out = np.zeros((self.nodes if nodal else self.elements, *rows[0].shape[1:]), rows[0].dtype)
        for part, r in zip(self.parts, rows):
            if nodal:
                out[part.owned_nodes] = r
            else:
                out[part.span[0]:part.span[1]] = r
        return out

    def _exchange_directory(self, workers: int) -> str:
        """The directory of this mesh's exchanges through shared memory (made at the first
        time loop, removed with the mesh or by `close`)."""
        if self._directory is None:
            from irfuse.dask.exchange import shared_directory

            self._directory = shared_directory(workers)
            self._removal = weakref.finalize(self, shutil.rmtree, self._directory, True)
        return self._directory

    def _drop_exchanges(self) -> None:
        """Every worker's exchanges of this mesh let go (those of the workers still in the
        cluster: a lost worker's went with its process), and their directory removed."""
        if self._directory is None:
            return
        from irfuse.dask.exchange import drop_exchanges

        present = cluster_workers(self.client)
        try:
            self.client.run(drop_exchanges, self._directory, workers=sorted(set(self.worker_of) & set(present)))
        finally:
            self._removal()
            self._directory = None

    def close(self) -> None:
        """Lets go of what time loops kept on the workers (exchange buffers, mappings of the
        others' buffers) and of the shared directory. The parts' arrays go with their futures."""
        self._drop_exchanges()

    def __enter__(self) -> "PartedMesh":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _same_host(self) -> bool:
        """Whether every worker of this mesh runs on the client's host (so that they can map
        the same files and open each other's GPU buffers); asked once."""
        if self._hosts is None:
            self._hosts = self.client.run(socket.gethostname, workers=sorted(set(self.worker_of)))
        return set(self._hosts.values()) == {socket.gethostname()}


def cluster_workers(client) -> list[str]:
    """The addresses of the workers the scheduler has now, asked of it in one request
    (`Client.nthreads`). Not `Client.scheduler_info()["workers"]`: that returns an attribute
    which the client's periodic update, running meanwhile on its own thread, may have replaced
    by a view that lists no workers (distributed 2026.8; a test on a loaded machine read none
    while the scheduler had three)."""
    return sorted(client.nthreads())


def _check_rows(a, kind: str, length: int):
    """`a`, if it holds one row per node (or element) of the mesh."""
    if a.ndim < 1 or a.shape[0] != length:
        raise UsageError(f"a {kind} array of this mesh has {length} rows (its "
                         f"{'nodes' if kind == NODAL else 'elements'}), not shape {a.shape}")
    return a


def _host(values, what: str) -> np.ndarray:
    refuse_grad(what, values)
    if hasattr(values, "__cuda_array_interface__") and hasattr(values, "get"):
        values = values.get()
    if not hasattr(values, "shape") and not isinstance(values, (list, tuple)):
        raise UsageError(f"{what} is a NumPy, CuPy or Dask array, not a {type(values).__qualname__}")
    return np.asarray(values)


def _prepared(conn: np.ndarray, nodes: int) -> Connectivity:
    return Connectivity(conn, nodes)


def _on_device(block: np.ndarray, gpu: bool):
    if not gpu:
        return block
    import cupy

    return cupy.asarray(block)


def _made_on_worker(values, part: Part, kind: str, gpu: bool):
    numbers = part.nodes if kind == NODAL else part.elements
    block = values(numbers)
    rows = len(numbers)
    if not hasattr(block, "shape") or block.shape[:1] != (rows,):
        raise UsageError(f"a function making a {kind} array gives each part {rows} rows (one per number it is "
                         f"given), not {getattr(block, 'shape', type(block).__qualname__)}")
    if gpu and not hasattr(block, "__cuda_array_interface__"):
        return _on_device(np.ascontiguousarray(block), gpu)
    return block


def _own_rows(block, part: Part, nodal: bool) -> np.ndarray:
    rows = block[part.owned] if nodal else block[part.own_elements]
    return rows.get() if hasattr(rows, "get") and not isinstance(rows, np.ndarray) else np.asarray(rows)


# Applying a program part by part -------------------------------------------------------------

def bound_on_parts(program, arrays: tuple, named: dict) -> tuple["PartedMesh", dict, dict]:
    """The mesh, each input as parted blocks or a uniform value, and the call options (see
    `apply`), after checking what parts can run."""
    from irfuse.api.programs import Program
    from irfuse.api.staged_programs import StagedProgram

    if not isinstance(program, (Program, StagedProgram)):
        raise UsageError(f"a program on a parted mesh is a Program (irfuse.compile), not a {type(program).__qualname__}")
    options = {k: named.pop(k) for k in ("scatter",) if k in named}
    if "nodes" in named:
        raise UsageError("nodes= is the PartedMesh's: a program on parts takes the mesh's node count from it")
    bound = bind_inputs(program.inputs, arrays, named, program)
    meshes = {id(a): a for a in bound.values() if isinstance(a, PartedMesh)}
    if not meshes and not getattr(program, "index_inputs", ()):
        raise UsageError(f"{program.name} has no connectivity input: irfuse.dask.time_loop runs a program over a mesh "
                         "given as a PartedMesh (irfuse.time_loop runs any program on one device; irfuse.dask.apply "
                         "spreads a batch over Dask's tasks)")
    if len(meshes) != 1:
        raise UsageError("a program on a parted mesh takes one PartedMesh, given for every connectivity input, not "
                         f"{len(meshes)}")
    (mesh,) = meshes.values()
    artifacts = [s.artifact for s in program.stages] if hasattr(program, "stages") else [program.artifact]
    if any(r for a in artifacts for k in a.kernels for r in k.reduced):
        raise UsageError(f"{program.name} reduces over the batch: on parts a reduction would count each part's "
                         "ghost elements twice; run it with irfuse.dask.apply on Dask arrays or as one call")
    given: dict[str, object] = {}
    for name, a in bound.items():
        if name in program.index_inputs:
            if a is not mesh:
                raise UsageError(f"input '{name}' is a connectivity: on parts it is the PartedMesh, not a "
                                 f"{type(a).__qualname__}")
            given[name] = PerPart(mesh.connectivity)
        elif name in program.uniform:
            given[name] = a
        else:
            kind = NODAL if name in program.nodal else ELEMENTS
            if isinstance(a, Parted):
                if a.mesh is not mesh or a.kind != kind:
                    raise UsageError(f"input '{name}' is a {kind} array of the PartedMesh, not a {a.kind} array of "
                                     f"{'it' if a.mesh is mesh else 'another mesh'}")
                given[name] = PerPart(a.blocks)
            elif isinstance(a, PartedMesh):
                raise UsageError(f"input '{name}' is {kind} values, not the mesh")
            else:
                given[name] = PerPart((mesh.nodal(a) if kind == NODAL else mesh.per_element(a)).blocks)
    return mesh, given, options


def ghost_exact(program) -> frozenset[str]:
    """The nodal outputs whose ghost rows a part computes exactly (given exact ghost rows of
    its nodal inputs): those of the passes over the nodes before the elements. The rest of a
    part's nodal outputs (a scatter's sums, what is computed from them) are exact at its owned
    nodes only."""
    plan = getattr(program, "plan", None)
    exact: set[str] = set()
    for step in getattr(plan, "passes", ()):
        if step.over == "elements":
            break
        exact.update(step.outputs)
    return frozenset(exact)


def apply_on_parts(program, arrays: tuple, named: dict) -> Outputs:
    """`irfuse.dask.apply` on a PartedMesh: one task per part on its worker, then the nodal
    outputs' ghost rows completed from their owners (two tasks per part; see the module)."""
    mesh, given, options = bound_on_parts(program, arrays, named)
    results = []
    for p in range(len(mesh.parts)):
        inputs = {k: v[p] if isinstance(v, PerPart) else v for k, v in given.items()}
        results.append(mesh._submit(p, _call_part, program, inputs, len(mesh.parts[p].nodes), options))
    behind = [k for k in program.outputs if k in program.nodal and k not in ghost_exact(program)]
    if behind:
        packs = [mesh._submit(p, _pack, r, behind, mesh._part[p]) for p, r in enumerate(results)]
        results = [mesh._submit(p, _completed, r, behind, mesh._part[p],
                                {q: packs[q] for q in part.reads}) for p, (part, r) in
                   enumerate(zip(mesh.parts, results))]
    return _parted_outputs(program, mesh, results)


def _parted_outputs(program, mesh: PartedMesh, results: list) -> Outputs:
    """The program's outputs as Parted arrays (uniform ones: the first part's value)."""
    out = []
    for name in program.outputs:
        picked = [mesh._submit(p, _pick, r, name) for p, r in enumerate(results)]
        if name in program.uniform:
            out.append(picked[0])
        else:
            out.append(Parted(mesh, NODAL if name in program.nodal else ELEMENTS, picked))
    return Outputs(program.outputs, out)


def _call_part(program, inputs: dict, nodes: int, options: dict) -> dict:
    return dict(zip(program.outputs, program(**inputs, nodes=nodes, **options)))


def _pick(results: dict, name: str):
    return results[name]


def _pack(results: dict, names: list[str], part: Part) -> dict:
    """The rows of `names` other parts read from this part (its `sends`)."""
    return {k: results[k][part.sends] for k in names}


def _completed(results: dict, names: list[str], part: Part, packs: dict) -> dict:
    """The results with the ghost rows of `names` set to their owners' values (copies: a
    task's results are not changed after it)."""
    from irfuse.dask.exchange import set_ghost_rows

    done = dict(results)
    for k in names:
        done[k] = results[k].copy()
        for q, pack in packs.items():
            set_ghost_rows(done[k], part.reads[q], pack[k], part.picks[q])
    return done


# Time loops ---------------------------------------------------------------------------------

EXCHANGES = ("auto", "shared", "dask")


def time_loop(program, steps: int, carry: dict, *arrays, exchange: str = "auto", timeout: float = 600.0,
              timings: dict | None = None, **named) -> Outputs:
    """`steps` calls of `program` on a PartedMesh, each taking as the inputs named in `carry`
    the outputs they map to (`{"u": "u1", "v": "v1"}`), the ghost rows of carried nodal
    values exchanged between steps; the last step's outputs as Parted arrays (waits for the
    loop). `exchange`: "shared" (the workers map each other's buffers: one host), "dask"
    (Dask queues: any cluster), "auto" (shared where possible); `timeout`: seconds a worker
    waits for another's step before it gives up (a lost worker does not hang the loop);
    `timings`: a dict given to be filled, for each worker, with the seconds from its first
    step until its GPU finished the last exchange ("seconds") and until its host had queued
    the last step ("queued"; much less than "seconds" when the GPU, not the host, sets the
    pace), and the host's seconds in the exchanges, waits for the others included
    ("exchanging"); without Dask's costs of the task."""
    from irfuse.dask.exchange import ExchangeSpec, PeerFailed

    from irfuse.api.time_loops import check_carry, check_steps

    steps = check_steps(steps)
    if not isinstance(exchange, str) or exchange not in EXCHANGES:
        raise UsageError(f"time_loop: exchange= is one of {', '.join(map(repr, EXCHANGES))}, not {exchange!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 0 < timeout < float("inf"):
        raise UsageError(f"time_loop: timeout= is the seconds a worker waits for another's step, a positive "
                         f"number, not {timeout!r}")
    if timings is not None and not isinstance(timings, dict):
        raise UsageError(f"time_loop: timings= is a dict to be filled, or None, not a {type(timings).__qualname__}")
    mesh, given, options = bound_on_parts(program, arrays, named)
    check_carry(program, carry)
    exact = ghost_exact(program)
    behind = [k for k in program.outputs if k in program.nodal and k not in exact]
    shared = exchange == "shared" or (exchange == "auto" and mesh._same_host())
    if exchange == "shared" and not mesh._same_host():
        raise UsageError("time_loop: exchange='shared' maps memory of the client's host, and some workers run "
                         "elsewhere: use exchange='dask'")
    ranks = sorted(set(mesh.worker_of), key=mesh.worker_of.index)
    mesh._loops += 1
    spec = ExchangeSpec(
        token=uuid.uuid4().hex, directory=mesh._exchange_directory(len(ranks)) if shared else None, ranks=ranks,
        rank_of_part=[ranks.index(w) for w in mesh.worker_of], names={k: program.shapes[k] for k in behind},
        dtype=str(program.dtype), gpu=mesh.gpu, timeout=float(timeout), loop=mesh._loops)
    import distributed

    tasks = []
    for rank, worker in enumerate(spec.ranks):
        mine = [p for p, w in enumerate(mesh.worker_of) if w == worker]
        inputs = {p: {k: v[p] if isinstance(v, PerPart) else v for k, v in given.items()} for p in mine}
        tasks.append(mesh.client.submit(
            _loop_on_worker, program, int(steps), dict(carry), behind, options, spec, rank,
            {p: mesh._part[p] for p in mine}, [p.reads for p in mesh.parts], inputs,
            workers=[worker], allow_other_workers=False, pure=False))
    try:
        distributed.wait(tasks)
    except distributed.client.FuturesCancelledError:  # a worker lost: its task is cancelled
        distributed.wait([t for t in tasks if t.status not in ("cancelled", "lost")])
    errors = [t.exception() for t in tasks if t.status == "error"]
    lost = [spec.ranks[k] for k, t in enumerate(tasks) if t.status in ("cancelled", "lost")]
    if errors or lost:  # the error of a worker that failed first, not of those it stopped
        if shared:  # (the next loop starts from new buffers on every worker)
            mesh._drop_exchanges()
        first = next((e for e in errors if not isinstance(e, PeerFailed)), errors[0] if errors else None)
        if lost:
            raise ExecutionError(f"time loop: worker{'s' if len(lost) > 1 else ''} {', '.join(lost)} left the "
                                 "cluster during the loop (its process ended, or the scheduler removed it)"
                                 + "".join(f"; {d.message}" for d in getattr(first, "diagnostics", ())))
        raise first
    if timings is not None:
        timings.update(zip(spec.ranks, mesh.client.gather([mesh.client.submit(_pick, t, "timings") for t in tasks])))
    results = []
    for p, worker in enumerate(mesh.worker_of):
        results.append(mesh._submit(p, _part_outputs, tasks[spec.ranks.index(worker)], p))
    return _parted_outputs(program, mesh, results)


def _part_outputs(loop: dict, p: int) -> dict:
    return loop["outputs"][p]


def _loop_on_worker(program, steps: int, carry: dict, behind: list, options: dict, spec, rank: int,
                    parts: dict, reads: list, inputs: dict) -> dict:
    """One worker's share of a time loop: its parts' states stepped `steps` times, exchanging
    ghost rows with the other workers after every step; each part's last outputs."""
    from irfuse.dask.exchange import open_exchange

    states = {p: dict(v) for p, v in inputs.items()}
    carried = [k for k in behind if k in carry.values()]
    with open_exchange(spec, rank, parts, reads) as exchange:
        start, exchanging = time.perf_counter(), 0.0
        for step in range(steps):
            last = {p: dict(zip(program.outputs, program(**states[p], nodes=len(parts[p].nodes), **options)))
                    for p in parts}
            names = behind if step == steps - 1 else carried
            entered = time.perf_counter()
            try:
                exchange.step(step, {p: {k: last[p][k] for k in names} for p in parts})
            except ExecutionError as e:  # (said with the step where it stopped)
                said = "; ".join(d.message for d in e.diagnostics)
                raise type(e)(f"{said} (at step {step + 1} of {steps})") from None
            exchanging += time.perf_counter() - entered
            for p in parts:
                states[p].update({i: last[p][o] for i, o in carry.items()})
        queued = time.perf_counter() - start
        exchange.close()
        seconds = time.perf_counter() - start
    return {"outputs": last, "timings": {"seconds": seconds, "queued": queued, "exchanging": exchanging}}
