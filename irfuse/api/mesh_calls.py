"""Calls of programs over a mesh: nodal arrays, connectivities and per-element arrays bound
and checked, then one run on the program's device.

A call takes nodal arrays shaped `(M, *value shape)`, connectivities `(E, K)` of int32 or
int64 node numbers, per-element arrays `(E, *value shape)` and uniform values as usual; it
returns nodal outputs shaped `(M, *value shape)`. `M` comes from the nodal inputs, or from
`nodes=` when the program has none. Every node number is checked against `[0, M)` before
anything runs (a refusal names the element and position), and each connectivity a scatter
reads gets its scatter order (`irfuse.mesh.inverse_connectivity`: each group's partials and
their slots, each node's partials) before the run; a connectivity passed as an `irfuse.mesh.Connectivity` carries both,
made once. `scatter="atomic"` runs the scatters with atomics instead: no inverse to make (what
a connectivity used once saves), and on the GPU the order of the additions, hence the last
bits, changes from run to run (the CPU backend adds in the fixed order either way).

Within a device-memory budget (`memory_budget=`; on the GPU half its free memory when none is
given: `runtime.streaming.device_budget`) a call runs in chunks of elements
(`irfuse.runtime.mesh_runs`): the nodal values stay whole on the device, and each chunk's
scatters go on from the sums of the chunks before it, so that every node's additions are
those of one call in its order: the same bits. `chunk_onto` runs one such chunk whose
earlier chunks ran elsewhere (`irfuse.dask`).
These calls take NumPy arrays (calls on GPU arrays are `irfuse.api.mesh_gpu_calls`), every
nodal and per-element array in arrays of structures `(count, *shape)` or every one in structures
of arrays `(*shape, count)` (`mesh_layout`; where every array fits both, the first): the kernels
read arrays of structures, so structures of arrays are transposed into copies on the way in and
the outputs back on the way out (one more pass over each, on the host). Anything else is
refused by name.
"""

from __future__ import annotations

import numpy as np

from irfuse.api.arguments import (bind_inputs, bind_outputs, check_array, check_output_array, host_uniform,
                                  host_array, same_batch_length)
from irfuse.api.device_arrays import device_array
from irfuse.api.host_calls import aligned_copy, keep_fast_call, refuse_overlapping_outputs
from irfuse.api.outputs import Outputs
from irfuse.artifact.arrays import AOS, SOA
from irfuse.artifact.arrays import fits as fits_shape
from irfuse.diagnostics import ExecutionError, UsageError, is_whole
from irfuse.mesh.connectivity import Connectivity
from irfuse.mesh.order import check_connectivity, node_numbers
from irfuse.runtime.mesh_runs import mesh_chunk_elements, run_chunk_onto, run_mesh
from irfuse.runtime.streaming import device_budget

NO_ELEMENTS = "a program over a mesh needs at least one element"


def mesh_layout(program, bound: dict, layout: str | None = None) -> str:
    """The layout of a call's nodal and per-element arrays: `layout` where given (a program of
    passes tells each pass its call's), else arrays of structures where every one fits it,
    else structures of arrays where every one fits that (else arrays of structures, whose check
    names the array that does not fit)."""
    if layout is not None:
        return layout
    values = [(tuple(np.shape(v)), name) for name, v in bound.items()
              if name not in program.index_inputs and name not in program.uniform and hasattr(v, "shape")]
    for layout in (AOS, SOA):
        if all(fits_shape(shape, program.shapes[name], layout) for shape, name in values):
            return layout
    return AOS


def bind_mesh_arguments(program, args: tuple, named: dict, nodes: int | None, first: int = 0,
                        layout: str | None = None) -> tuple[dict[str, np.ndarray], int, int, dict, str]:
    """(name -> array, elements E, nodes M, name -> inverse of each connectivity given as a
    `Connectivity`, the arguments' layout), every argument checked (`first`: the number in the whole mesh of the
    first element, which refusals count from); nodal and per-element arrays in structures of
    arrays (`mesh_layout`) transposed into arrays of structures."""
    bound = bind_inputs(program.inputs, args, named, program)
    layout = mesh_layout(program, bound, layout)
    arrays: dict[str, np.ndarray] = {}
    elements: dict[str, int] = {}
    node_counts: dict[str, int] = {}
    prepared: dict[str, Connectivity] = {}
    for name, value in bound.items():
        what = f"input '{name}'"
        if device_array(value) is not None:
            raise UsageError(f"{what} is a GPU array; a program over a mesh runs its chunks (irfuse.dask) on "
                             "NumPy arrays for now")
        if name in program.index_inputs:
            if isinstance(value, Connectivity):
                prepared[name] = value
                value = value.conn
            a = connectivity_array(what, value, program.shapes[name][0])
            elements[name] = len(a)
        elif name in program.uniform:
            a = host_uniform(what, value, program.shapes[name], program.dtype)
        else:
            a = host_array(what, value, program.dtype)
            length = check_array(what, a, program.shapes[name], program.dtype, None, layout)
            if layout == SOA:
                a = np.ascontiguousarray(np.moveaxis(a, -1, 0))
            (node_counts if name in program.nodal else elements)[name] = length
        arrays[name] = a if a.flags.c_contiguous and a.ctypes.data % 16 == 0 else aligned_copy(a)
    n, m = mesh_sizes(elements, node_counts, nodes)
    inverses = {}
    for name in program.index_inputs:
        given = prepared.get(name)
        if given is not None:
            if given.nodes != m:
                raise UsageError(f"input '{name}' is a Connectivity of {given.nodes} nodes; the call's nodal arrays "
                                 f"hold {m}")
            inverses[name] = given.inverse
        else:
            check_connectivity(arrays[name], m, f"input '{name}'", first)
    return arrays, n, m, inverses, layout


# How a call's scatters add: in the fixed order (the same bits every run), or with atomics.
SCATTER_MODES = ("ordered", "atomic")


def scatter_mode(scatter) -> str:
    """A call's `scatter=`, checked: "ordered" (also where None: the default) or "atomic"."""
    if scatter is None:
        return "ordered"
    if not isinstance(scatter, str) or scatter not in SCATTER_MODES:
        raise UsageError(f"scatter= is one of {', '.join(map(repr, SCATTER_MODES))}, not {scatter!r}")
    return scatter


def nodes_given(nodes):
    """A call's `nodes=`, checked: None or a positive whole number (before the calls made again
    compare it with theirs, which an array could not answer)."""
    if nodes is not None and (not is_whole(nodes) or nodes < 1):
        raise UsageError(f"nodes= takes the mesh's number of nodes, a positive whole number, not {nodes!r}")
    return nodes


def mesh_sizes(elements: dict[str, int], node_counts: dict[str, int], nodes: int | None) -> tuple[int, int]:
    """(E, M) of a call from its arguments' lengths (name -> elements, name -> nodes) and
    `nodes=`, every disagreement refused by name."""
    nodes_given(nodes)
    n = same_batch_length(elements)
    m = same_batch_length(node_counts)
    if m is None:
        if nodes is None:
            raise UsageError("the program has no nodal input to tell its number of nodes: pass nodes=M")
        m = int(nodes)
    elif nodes is not None and nodes != m:
        first = next(iter(node_counts))
        raise UsageError(f"nodes={nodes} disagrees with nodal input '{first}', which holds {m} nodes")
    if n is None or n == 0:
        raise UsageError(NO_ELEMENTS)
    return n, m


def connectivity_array(what: str, value, count: int) -> np.ndarray:
    """A connectivity argument as contiguous int32 node numbers (int64 ones converted, where
    every number fits), shaped (E, count)."""
    a = node_numbers(what, value if isinstance(value, (np.ndarray, list, tuple)) else host_array(what, value))
    if a.ndim != 2 or a.shape[1] != count:
        raise UsageError(f"{what} has shape {a.shape}; a connectivity of {count} nodes per element is shaped "
                         f"(elements, {count})")
    if a.dtype != np.int32:
        if a.size and (a.max() > np.iinfo(np.int32).max or a.min() < np.iinfo(np.int32).min):
            raise UsageError(f"{what} holds node numbers beyond int32; a mesh has fewer than 2^31 nodes")
        a = a.astype(np.int32)
    return np.ascontiguousarray(a)


def call_on_mesh(program, args: tuple, named: dict, out, nodes: int | None, scatter: str = "ordered",
                 memory_budget: int | None = None, progress=None, verify: bool = False,
                 layout: str | None = None) -> tuple[Outputs, int, int]:
    """Runs the program on a mesh's arrays (see the module): its outputs (in the arrays'
    layout), E and M. `scatter`: "ordered" or "atomic"; `memory_budget`: device bytes the call
    may take (`runtime.mesh_runs`), `progress(done, total)` told of each chunk; `verify`:
    the outputs checked against the reference (`verify_mesh_call`)."""
    scatter = scatter_mode(scatter)
    arrays, n, m, inverses, layout = bind_mesh_arguments(program, args, named, nodes, layout=layout)
    given = bind_outputs(program.outputs, out) if out is not None else {}
    results = []
    for name in program.outputs:
        count = m if name in program.nodal else n
        if name in given:
            what = f"out= array for '{name}'"
            if name in program.uniform:
                results.append(check_output_array(what, given[name], program.shapes[name], program.dtype, None))
            else:
                target = check_output_array(what, given[name], program.shapes[name], program.dtype, count, layout)
                results.append(target if layout == AOS else np.empty((count, *program.shapes[name]), program.dtype))
        else:
            shape = program.shapes[name] if name in program.uniform else (count, *program.shapes[name])
            results.append(np.empty(shape, program.dtype))
    refuse_overlapping_outputs({name: given[name] for name in program.outputs if name in given})
    with program.lock:
        dev = program.opened_device()
        budget = device_budget(dev, memory_budget if memory_budget is not None else program.memory_budget)
        targets = dict(zip(program.outputs, results))
        ran = _in_place(program, dev, arrays, targets, inverses, scatter, budget, layout, n, m, progress)
        if ran is None:
            run_mesh(program.artifact, dev, arrays, n, m, inverses, scatter, targets, budget, progress)
        elif not verify and progress is None and memory_budget is None:
            shapes = None if out is not None else {
                name: program.shapes[name] if name in program.uniform else
                (m if name in program.nodal else n, *program.shapes[name]) for name in program.outputs}
            keep_fast_call(program, args, named, out, arrays, targets, ran, shapes, (scatter, nodes))
    if verify:
        verify_mesh_call(program, arrays, Outputs(program.outputs, results), n, m)
    if layout == SOA:  # back into the caller's layout (into its out= arrays where given)
        for k, name in enumerate(program.outputs):
            if name in program.uniform:
                continue
            soa = np.moveaxis(results[k], 0, -1)
            if name in given:
                np.copyto(given[name], soa)
                results[k] = given[name]
            else:
                results[k] = np.ascontiguousarray(soa)
    return Outputs(program.outputs, results), n, m


class _OnArrays:
    """A `MeshInPlaceRun` run on arrays (`HostFastCall`'s `run(arrays, results)`)."""

    def __init__(self, run):
        self.mesh_run = run
        self.inputs, self.outputs, self.recorded = run.inputs, run.outputs, run.recorded  # (`HostFastCall`)

    def run(self, arrays: dict, results: dict) -> None:
        self.mesh_run.run({name: _slot(a) for name, a in arrays.items()},
                          {name: _slot(a) for name, a in results.items()})
        for s in self.mesh_run.inputs.values():
            s.array = None  # hold no caller's array between calls


def _slot(a: np.ndarray):
    from irfuse.runtime.device import Slot

    s = Slot()
    s.ptr, s.nbytes, s.array = a.ctypes.data, a.nbytes, a
    return s


def _in_place(program, dev, arrays: dict, results: dict, inverses: dict, scatter: str, budget, layout: str,
              n: int, m: int, progress) -> "_OnArrays | None":
    """Runs a call on the CPU backend in place where it can (what ran it; None where it did
    not): NumPy arrays of structures
    that the kernels can use as they are (`in_place_on_the_host`), in one piece, every
    connectivity a `Connectivity` (its scatter order made once) or the scatters atomic. The
    run is recorded once per (E, M, connectivities) and kept (`MeshInPlaceRun`), its places
    pointed at each call's arrays: no copy in or out, nothing made again."""
    from irfuse.api.host_calls import in_place_on_the_host
    from irfuse.runtime.mesh_runs import MeshInPlaceRun

    if dev.name != "cpu" or layout != AOS or not n or (budget is not None and mesh_chunk_elements(
            program.artifact, n, m, budget) < n):
        return None
    if scatter != "atomic" and len(inverses) < len(program.index_inputs):
        return None  # (a connectivity given as an array: its scatter order is made by this call)
    if not in_place_on_the_host(arrays, results):
        return None
    slots = {name: _slot(a) for name, a in arrays.items()}
    key = ("mesh-host", n, m, scatter, tuple(id(inverses.get(k)) for k in sorted(program.index_inputs)))

    def record() -> MeshInPlaceRun:
        run = MeshInPlaceRun(program.artifact, dev, n, m, slots, inverses, scatter)
        run.keep = dict(inverses)  # (so the ids in its key stay those of these scatter orders)
        return run
    ran = _OnArrays(program.recorded(key, record))
    ran.run(arrays, results)
    if progress is not None:
        progress(1, 1)
    return ran


def chunk_onto(program, sums: dict[str, np.ndarray] | None, nodes: int, scatter: str, first: int,
               *blocks) -> tuple[dict, dict]:
    """A chunk of a call over a mesh whose earlier chunks ran elsewhere (`irfuse.dask`): its
    inputs in the program's order (nodal ones whole, connectivities and per-element values
    the chunk's, whose first element is `first` of the mesh), its scatters going on from
    `sums` (the nodal outputs so far; None for the first chunk). Returns (per-element
    outputs, nodal sums), NumPy arrays."""
    align = program.artifact.host.align
    if first % align:
        raise UsageError(f"chunk_onto: a chunk starts at element {first}, not a multiple of {align}, the elements "
                         "its scatters add in one group; chunks of whole groups give one call's bits")
    arrays, n, m, _, _ = bind_mesh_arguments(program, blocks, {}, nodes, first)
    with program.lock:
        return run_chunk_onto(program.artifact, program.opened_device(), arrays, n, m, sums, scatter)


def mesh_verification(program, arrays: dict, outputs: Outputs, n: int, nodes: int):
    """A call's outputs against the float64 reference, every element and node (`Verification`)."""
    from irfuse.api.verification import Verification
    from irfuse.verification.reference import run_references
    from irfuse.verification.verify import check_outputs

    compiled = program.compiled
    refs = run_references(compiled.reference_program, arrays, compiled.dtype, n, compiled.sum_by, nodes=nodes)
    return Verification(check_outputs(dict(zip(program.outputs, outputs)), refs, compiled.dtype), n, n)


def verify_mesh_call(program, arrays: dict, outputs: Outputs, n: int, nodes: int) -> None:
    """Raises `ExecutionError` where a call's outputs disagree with the float64 reference."""
    report = mesh_verification(program, arrays, outputs, n, nodes)
    if not report.ok:
        raise ExecutionError(f"{program.name}: the outputs disagree with the NumPy reference: {report}")
