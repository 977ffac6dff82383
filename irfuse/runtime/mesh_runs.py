"""Running an artifact over a mesh on a device: in one piece, or in chunks of elements within a
device-memory budget, and a chunk whose earlier chunks ran elsewhere.

A chunk holds whole scatter groups (`artifact.host.align` elements): the nodal values stay
whole on the device, each chunk's per-element values and node numbers are uploaded in turn,
and its scatters add onto the sums of the chunks before it (`Executor.prepare(onto=True)`):
the ordered scatter adds each node's rows in the order of one call, so chunks give its bits.
Calls hand these functions host arrays of structures (`irfuse.api.mesh_calls` binds and
checks them); `MeshInPlaceRun` is the recorded run of a call on GPU arrays (or on NumPy arrays
in place on the CPU backend), pointed at each call's
arrays before its replay.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from irfuse.artifact.artifact import Artifact
from irfuse.artifact.host_plan import NODAL, UNIFORM, NodeLaunch, Scatter
from irfuse.diagnostics import UsageError

GRAPHS_KEPT = 4  # sets of places a mesh run keeps a CUDA graph for (`MeshInPlaceRun.graph`)
from irfuse.runtime.device import Slot
from irfuse.runtime.executor import Executor
from irfuse.runtime.streaming import whole_chunk


class OnePieceOnly(UsageError):
    """A plan whose node launches add a scatter's sums themselves (`NodeLaunch`) asked to run
    in chunks: it runs in one piece (a program of passes runs its passes one by one instead)."""


def mesh_chunk_elements(artifact: Artifact, n: int, nodes: int, budget: int | None) -> int:
    """Elements per chunk of a call over a mesh within `budget` bytes of device memory (all of
    them when no budget is given): the nodal values and each connectivity's node offsets are
    kept whole; a chunk holds its elements' values, temporaries, node numbers and slots."""
    if budget is None:
        return n
    host, itemsize = artifact.host, artifact.itemsize
    scattered = {step.index for step in host.steps if isinstance(step, Scatter)}
    fixed = per = 0
    for value in {v for _, v in host.inputs} | {r for launch in host.launches() for r in launch.results} | \
            {step.result for step in host.steps if isinstance(step, Scatter)}:
        info = host.values[value]
        if info.extent == NODAL:
            fixed += nodes * info.words * itemsize
        elif info.integer:
            # node numbers, and where scattered each slot's member byte and (at most) a partial's
            # first byte and number
            per += info.shape[0] * (4 + (1 + 1 + 4 if value in scattered else 0))
            fixed += (nodes + 1) * 8 if value in scattered else 0
        elif info.extent != UNIFORM:
            per += info.words * itemsize
    chunk = (budget - fixed) // max(per, 1)
    if chunk < 1:
        raise UsageError(f"a device-memory budget of {budget} bytes cannot hold the mesh's nodal values and node "
                         f"offsets ({fixed} bytes) and one element ({per} bytes)")
    if host.combines():
        if chunk < n:
            raise UsageError("a program over a mesh that reduces over its batch runs in one piece; its "
                             f"{n} elements need {fixed + per * n} bytes, over the budget of {budget}")
    if chunk < n and any(isinstance(step, NodeLaunch) for step in host.steps):
        raise OnePieceOnly(f"program {host.name} runs in one piece (its statements after a scatter run in the kernel "
                           f"that adds each node's partials); its {n} elements need more than {budget} bytes")
    # (chunks of whole scatter groups give one call's bits)
    return min(n, whole_chunk(chunk, n, host.align, lambda: (
        f"a device-memory budget of {budget} bytes cannot hold the mesh's nodal values and node offsets ({fixed} "
        f"bytes) and {host.align} elements ({per * host.align} bytes): a chunk holds a multiple of {host.align}, the "
        "elements its scatters add in one group")))


def run_mesh(artifact: Artifact, dev, arrays: dict[str, np.ndarray], n: int, m: int, inverses: dict, scatter: str,
             results: dict[str, np.ndarray], budget: int | None, progress: Callable[[int, int], None] | None) -> int:
    """Runs a call over a mesh of `n` elements and `m` nodes on host arrays of structures
    (`inverses`: the scatter orders prepared beforehand, by connectivity), its outputs read into
    `results`: in one piece, or in chunks within `budget` (each told to `progress`). Returns
    the number of chunks (1: one piece)."""
    chunk = mesh_chunk_elements(artifact, n, m, budget)
    if chunk < n:
        return run_mesh_in_chunks(artifact, dev, arrays, n, m, chunk, results, scatter, progress)
    recorded = Executor(artifact, dev).prepare(arrays, n, nodes=m, inverses=inverses, scatter=scatter)
    recorded.replay()
    dev.synchronize()
    for name, target in results.items():
        buf, _ = recorded.results[name]
        dev.read_into(target, buf)
    if progress is not None:
        progress(1, 1)
    return 1


def run_mesh_in_chunks(artifact: Artifact, dev, arrays: dict[str, np.ndarray], n: int, m: int, chunk: int,
                       results: dict[str, np.ndarray], scatter: str, progress) -> int:
    """Runs a call over a mesh in chunks of `chunk` elements (see the module); returns how many."""
    host = artifact.host
    nodal, shapes = host.nodal_names(), host.shapes()
    uploaded = {name: dev.upload(arrays[name]) for name in host.input_names if name in nodal}
    sums = {name: dev.alloc((m, *shapes[name])) for name in host.output_names if name in nodal}
    total = -(-n // chunk)
    for k, first in enumerate(range(0, n, chunk)):
        last = min(n, first + chunk)
        run_mesh_chunk(artifact, dev, elements_of(artifact, arrays, first, last), last - first, m, uploaded, sums,
                       scatter, k > 0, elements_of(artifact, results, first, last))
        if progress is not None:
            progress(k + 1, total)
    for name, buf in sums.items():
        dev.read_into(results[name], buf)
    return total


def elements_of(artifact: Artifact, arrays: dict, first: int, last: int) -> dict:
    """Elements first..last of a call's arrays: connectivities and per-element values sliced,
    uniform values as they are; nodal ones left out."""
    uniform, nodal = artifact.host.uniform_names(), artifact.host.nodal_names()
    return {name: a if name in uniform else a[first:last] for name, a in arrays.items() if name not in nodal}


def run_mesh_chunk(artifact: Artifact, dev, arrays: dict[str, np.ndarray], n: int, m: int, nodal: dict, sums: dict,
                   scatter: str, onto: bool, results: dict[str, np.ndarray]) -> None:
    """One chunk of `n` elements of a call over a mesh: `arrays` its per-element values and
    node numbers (and the uniform values), `nodal` the nodal inputs' device buffers, `sums`
    the nodal outputs' (which its scatters add onto when `onto`, else start); its per-element
    outputs read into `results`."""
    from irfuse.mesh.scatter import inverse_connectivity  # (imported by the first run over a mesh)

    host = artifact.host
    index = host.index_names()
    uploaded, inverses = dict(nodal), {}
    for name in host.input_names:
        if name in host.nodal_names():
            continue
        a = np.ascontiguousarray(arrays[name])
        if name in index:
            uploaded[name] = dev.upload_integers(a)
            if scatter == "ordered":
                inverses[name] = inverse_connectivity(a, m)
        else:
            uploaded[name] = dev.upload(a)
    recorded = Executor(artifact, dev).prepare({}, n, uploaded, outputs=sums, as_graph=False, nodes=m,
                                               inverses=inverses, scatter=scatter, onto=onto)
    recorded.replay()
    dev.synchronize()
    for name, target in results.items():
        buf, _ = recorded.results[name]
        dev.read_into(target, buf)


def run_chunk_onto(artifact: Artifact, dev, arrays: dict[str, np.ndarray], n: int, m: int,
                   sums: dict[str, np.ndarray] | None, scatter: str) -> tuple[dict, dict]:
    """A chunk of `n` elements of a call over a mesh whose earlier chunks ran elsewhere: its
    nodal inputs whole, its per-element arrays and node numbers the chunk's, its scatters going
    on from `sums` (the nodal outputs so far; None for the first chunk). Returns (per-element
    outputs, nodal sums), NumPy arrays."""
    host = artifact.host
    nodal, shapes, dtype = host.nodal_names(), host.shapes(), artifact.element.numpy
    results = {name: np.empty((n, *shapes[name]), dtype) for name in host.output_names if name not in nodal}
    uploaded = {name: dev.upload(arrays[name]) for name in host.input_names if name in nodal}
    bufs = {name: dev.upload(sums[name]) if sums is not None else dev.alloc((m, *shapes[name]))
            for name in host.output_names if name in nodal}
    run_mesh_chunk(artifact, dev, elements_of(artifact, arrays, 0, n), n, m, uploaded, bufs, scatter,
                   sums is not None, results)
    totals = {name: dev.download(buf, (m, *shapes[name])) for name, buf in bufs.items()}
    return results, totals


class MeshInPlaceRun:
    """A mesh call's run recorded for one (E, M): a `Slot` for each argument and output in
    place (GPU arrays; NumPy arrays on the CPU backend),
    pointed at the call's arrays before each replay; a uniform input given on the host is
    written into a buffer of the run's own."""

    def __init__(self, artifact: Artifact, dev, n: int, m: int, given: dict, inverses: dict, scatter: str):
        host = artifact.host
        index, shapes = host.index_names(), host.shapes()
        self.device = dev
        self.inputs = {name: Slot() for name in host.input_names}
        self.outputs = {name: Slot() for name in host.output_names}
        self.host = {name: dev.alloc(shapes[name]) for name, v in given.items() if not isinstance(v, Slot)
                     and name not in index}
        bound = {name: self.host.get(name, self.inputs[name]) for name in host.input_names}
        bound.update({name: v for name, v in given.items() if name in index and
                      not isinstance(v, Slot)})  # a Connectivity's node numbers, kept on the device
        self.recorded = Executor(artifact, dev).prepare({}, n, bound, outputs=self.outputs, as_graph=False,
                                                        nodes=m, inverses=inverses, scatter=scatter)
        self.graphs: OrderedDict[tuple, object] = OrderedDict()  # (`graph`)
        self.seen: OrderedDict[tuple, None] = OrderedDict()

    def graph(self, given: dict, results: dict):
        """On the GPU, the run on these places (as `run` takes them) as a CUDA graph of the
        device's own, captured the second time they are asked for (None the first: a call
        without `out=` has new outputs, whose addresses repeat where a loop lets go of its
        last ones); the last `GRAPHS_KEPT` sets of places kept (a graph destroyed while it
        runs is freed by the driver once it is done)."""
        key = tuple(v.ptr for v in given.values() if isinstance(v, Slot)) + tuple(a.ptr for a in results.values())
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.seen:
                self.seen[key] = None
                while len(self.seen) > GRAPHS_KEPT:
                    self.seen.popitem(last=False)
                return None
            graph = self.graphs[key] = self.device.capture(lambda: self.run(given, results))
            while len(self.graphs) > GRAPHS_KEPT:
                self.graphs.popitem(last=False)[1].destroy()
        return graph

    def release(self) -> None:
        for graph in self.graphs.values():
            graph.destroy()
        self.graphs.clear()

    def run(self, given: dict, results: dict) -> None:
        """Replays the run on the call's arguments (`Slot`s, or host arrays of uniform values)
        into its outputs (anything with `ptr` and `nbytes`)."""
        for name, v in given.items():
            if isinstance(v, Slot):
                self.inputs[name].ptr, self.inputs[name].nbytes = v.ptr, v.nbytes
            elif name in self.host:
                self.device.copy(self.host[name], v)
        for name, a in results.items():
            self.outputs[name].ptr, self.outputs[name].nbytes = a.ptr, a.nbytes
        self.recorded.replay()
