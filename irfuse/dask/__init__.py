"""Programs applied to Dask arrays chunked along the batch axis.

    import dask.array as da
    import irfuse, irfuse.dask

    prog = irfuse.compile("stvenant.kas")
    outs = irfuse.dask.apply(prog, T4, Mf, phi, M1, w)   # Dask arrays in, Dask arrays out
    outs.vec3nodestiff.compute()

Every element is independent, so each chunk of the batch is one task: the program called
on the chunk's blocks (NumPy arrays, or CuPy arrays on GPU workers), where the worker holds
them; blocks never travel through the client. The tasks are a blockwise layer of the Dask
array graph: a program with one output gives its blocks straight from those tasks, which
Dask's graph optimization fuses with blockwise work before and after them, so a time loop
of K applications runs as one task a chunk, not K (each task costs the scheduler a round
trip of several milliseconds); a program with several outputs adds one small task a chunk
per output, picking it from the chunk's results. The program reaches a worker as what it was
compiled from (`Program.__reduce__`), and each worker process compiles it once (or loads
it from the disk cache) and keeps it. Inputs are chunked along the batch axis (the first
axis of arrays of structures, the last of structures of arrays) alike; an input chunked
otherwise is rechunked to the first input's batch chunks, whole along its value axes.
A uniform input (one value for the whole batch: a Dask or NumPy array shaped as the value,
or a number for a uniform scalar, as a call takes it) goes whole to every task (copied to
the GPU of a task whose chunks are CuPy arrays), and a uniform output that only uniform
inputs make is the first task's.

A program that reduces over the batch (`sum`, `max`, `min`) runs as phases cut at its
reductions (`irfuse.transforms.batch_phases`): each task of phase 0 gives its chunk's
outputs that need no reduction and its chunk's partial of each reduction; the partials are
combined in a tree of Dask tasks, in chunk order (groups of `COMBINE_EVERY` consecutive
ones, each combined pairwise left to right), and the combined values go to every task of
the next phase as uniform inputs. The same chunks give the same bits every time, on any
number of workers; a maximum or minimum is the one-call value, a sum differs from it
within the summation error of float arithmetic (the one call adds in another order).
A program over a mesh (`irfuse.api.mesh_calls`) takes its nodal inputs whole (NumPy arrays,
or Dask arrays made one chunk) and its connectivities and per-element inputs chunked along
the elements (rechunked to the first one's chunks). Its chunks run one after another, each
task's scatters going on from the nodal sums of the task before it (`mesh_calls.chunk_onto`):
every node's additions are those of one call, in its order, so the outputs have its bits
(the per-element outputs are each chunk's own). The chain is what the fixed order costs: the
chunks of one mesh do not run side by side. A mesh given as an `irfuse.dask.PartedMesh` (its
connectivity cut into parts that each own nodes, placed on workers) runs part by part, side
by side, with the one call's bits, and time loops run on it (`irfuse.dask.parts`).
Requires the `dask` extra (`pip install irfuse[dask]`: dask, distributed, dask-cuda).
"""

from __future__ import annotations

import numpy as np

from irfuse.api.arguments import bind_inputs, call_layout, host_scalar
from irfuse.api.programs import Outputs, Program
from irfuse.diagnostics import UsageError
from irfuse.artifact.arrays import AOS, batch_shape
from irfuse.dask.parts import Parted, PartedMesh, apply_on_parts, time_loop

__all__ = ["Parted", "PartedMesh", "apply", "time_loop"]

# Partials combined by one task of the reduction tree.
COMBINE_EVERY = 8


def _run_phase(program: Program, phase: int, *blocks) -> Outputs:
    """Phase `phase` of `program` on one chunk: compiled (or loaded) once per worker process.
    Uniform inputs in host memory (a few words each) follow CuPy chunks onto their GPU."""
    target = program.phases()[1][phase]
    blocks = tuple(_block(b) for b in blocks)
    if any(hasattr(b, "__cuda_array_interface__") for k, b in zip(target.inputs, blocks) if k not in target.uniform):
        import cupy

        blocks = tuple(cupy.asarray(b) if k in target.uniform and isinstance(b, np.ndarray) else b
                       for k, b in zip(target.inputs, blocks))
    return target(*blocks)


def _run_one(program: Program, phase: int, name: str, *blocks):
    """Output `name` of phase `phase` on one chunk (a phase whose only output it is)."""
    return _run_phase(program, phase, *blocks)[name]


def _block(b):
    """A chunk's block as blockwise hands it over: inside one list per value axis (each axis
    is one chunk). Not concatenated by Dask, which would copy it."""
    while isinstance(b, list):
        (b,) = b
    return b


def _pick(results, name: str):
    return results[name]


def _empty(meta, ndim: int, dtype):
    """An empty array of `meta`'s family (NumPy or CuPy): a Dask array's meta."""
    return np.empty_like(meta, shape=(0,) * ndim, dtype=dtype)


def _index(layout: str, tag: str, rank: int) -> tuple[str, ...]:
    """A blockwise index: the batch axis "b" (first in an array of structures, last in a
    structure of arrays) and one index of its own per value axis."""
    values = tuple(f"{tag}:{d}" for d in range(rank))
    return ("b", *values) if layout == AOS else (*values, "b")


def _combine(kind: str, *values):
    """Consecutive chunks' partials combined pairwise, left to right, word by word, in their
    own precision and array family (NumPy or CuPy)."""

    def two(a, b):
        r = a + b if kind == "sum" else np.maximum(a, b) if kind == "max" else np.minimum(a, b)
        return r if hasattr(r, "__cuda_array_interface__") else np.asarray(r)

    values = list(values)
    while len(values) > 1:
        values = [two(values[k], values[k + 1]) if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def _combined(kind: str, partials: list):
    """A Dask reduction tree over `partials` in their order: one value (a Delayed)."""
    import dask

    task = dask.delayed(_combine, pure=True)
    while len(partials) > 1:
        partials = [task(kind, *partials[k:k + COMBINE_EVERY]) for k in range(0, len(partials), COMBINE_EVERY)]
    return partials[0]


def apply(program: Program, *arrays, **named) -> Outputs:
    """`program` over Dask arrays (positional in its `input` order, or by name); its outputs
    as Dask arrays chunked like the inputs' batch axis, by name or position (`Outputs`). A
    program over a mesh also takes `nodes=` (its node count where no nodal input tells) and
    `scatter=` ("ordered", or "atomic") as its calls do; its chunks are NumPy arrays."""
    import dask
    import dask.array as da

    from irfuse.api.staged_programs import StagedProgram

    if any(isinstance(a, PartedMesh) for a in (*arrays, *named.values())):
        return apply_on_parts(program, arrays, named)
    if isinstance(program, StagedProgram):
        return _apply_stages(program, arrays, named)
    if not isinstance(program, Program):
        raise UsageError(f"irfuse.dask.apply takes a Program (irfuse.compile), not a {type(program).__qualname__}")
    if program.nodal or program.index_inputs:
        return _apply_on_mesh(program, arrays, named)
    plan = program.phase_plan()
    if len(plan.phases) > 1:
        program.compiled_from("its phases at its reductions cannot be compiled as it was")
    bound = bind_inputs(program.inputs, arrays, named, program)
    for name in program.uniform:  # (a number for a uniform scalar, as a call takes it: one value of the type)
        if name in bound and program.shapes[name] == ():
            number = host_scalar(f"input '{name}'", bound[name], np.dtype(program.dtype))
            bound[name] = bound[name] if number is None else number
    uniform = {name: a for name, a in bound.items() if name in program.uniform}
    for name, a in bound.items():
        if not isinstance(a, da.Array) and not (name in uniform and hasattr(a, "shape")):
            raise UsageError(f"input '{name}' is a {type(a).__qualname__}, not a Dask array (dask.array.from_array "
                             "makes one)")
    for name, a in uniform.items():
        if tuple(a.shape) != program.shapes[name]:
            raise UsageError(f"input '{name}' has shape {tuple(a.shape)}; it holds one value for the whole batch (it "
                             f"is uniform), shaped {program.shapes[name]}")
    batches = {k: a for k, a in bound.items() if k not in uniform}
    if not batches:
        raise UsageError(f"every input of {program.name} is uniform: there is no batch to spread over tasks")
    layout = call_layout(batches, program.shapes, program.layout)
    axis = 0 if layout == AOS else -1
    first_name = next(iter(batches))
    first = batches[first_name]
    n = first.shape[axis]
    batch_chunks = first.chunks[axis]
    args: dict[str, tuple] = {}  # input -> (block or value, blockwise index or None)
    for name, a in uniform.items():  # one value, read by every task
        args[name] = (a.rechunk(-1).to_delayed().reshape(-1)[0] if isinstance(a, da.Array) else a, None)
    for name, a in batches.items():
        if a.ndim != len(program.shapes[name]) + 1 or a.shape[axis] != n:
            raise UsageError(f"input '{name}' has shape {a.shape}; in this call's layout it must be "
                             f"{batch_shape(layout, program.shapes[name], n)} (the batch length of input "
                             f"'{first_name}')")
        whole = {k: -1 for k in range(a.ndim) if k != axis % a.ndim}
        args[name] = (a.rechunk({**whole, axis % a.ndim: batch_chunks}), _index(layout, f"in:{name}", a.ndim - 1))
    meta = first._meta  # NumPy or CuPy: the outputs' family

    def per_element(k: str, blocks, picked: str | None):
        """Output k as a Dask array: each block picked from its chunk's results by name, or
        (picked None) the blocks themselves."""
        shape = program.shapes[k]
        index = _index(layout, f"out:{k}", len(shape))
        values = index[1:] if layout == AOS else index[:-1]
        fn, extra = (_pick, (picked, None)) if picked is not None else (_run_one, ())
        return da.blockwise(fn, index, *blocks, *extra, new_axes=dict(zip(values, shape)), dtype=program.dtype,
                            concatenate=False, meta=_empty(meta, len(shape) + 1, program.dtype))

    parts: dict[str, object] = {}
    reduced: dict[str, object] = {}  # combined reductions by name (Delayed)
    pick = dask.delayed(_pick, pure=True)
    for p, phase in enumerate(plan.phases):
        reads = [(reduced[r.name], None) for r in phase.reads]
        flat = [x for k in program.inputs for x in args[k]] + [x for r in reads for x in r]
        gives = [k for k in phase.outputs if k not in program.uniform]
        if phase.per_chunk and len(gives) == 1 and len(phase.outputs) == 1 and not phase.partials:
            # The program's one output, each block made by one task: Dask fuses these tasks
            # with those of blockwise work before and after them (chained applications).
            parts[gives[0]] = per_element(gives[0], [program, None, p, None, gives[0], None, *flat], None)
            continue
        if phase.per_chunk:
            results = da.blockwise(_run_phase, ("b",), program, None, p, None, *flat, dtype=object,
                                   concatenate=False, meta=np.empty((0,), dtype=object))
            chunk_results = list(results.to_delayed().reshape(-1))
        else:  # only uniform values from uniform ones: once, on the first chunk
            firsts = [x.to_delayed().reshape(-1)[0] if isinstance(x, da.Array) else x
                      for x, _ in (args[k] for k in program.inputs)]
            chunk_results = [dask.delayed(_run_phase, pure=True)(program, p, *firsts, *[v for v, _ in reads])]
        for k in gives:
            parts[k] = per_element(k, [results, ("b",)], k)
        for k in phase.outputs:
            if k in program.uniform:  # the same on every chunk: the first one's
                parts[k] = da.from_delayed(pick(chunk_results[0], k), shape=program.shapes[k], dtype=program.dtype,
                                           meta=_empty(meta, len(program.shapes[k]), program.dtype))
        for r in phase.partials:
            reduced[r.name] = _combined(r.kind, [pick(c, r.name) for c in chunk_results])
    for k, name in plan.combined_outputs.items():
        parts[k] = da.from_delayed(reduced[name], shape=program.shapes[k], dtype=program.dtype,
                                   meta=_empty(meta, len(program.shapes[k]), program.dtype))
    return Outputs(program.outputs, [parts[k] for k in program.outputs])


def _chunk_onto(program: Program, sums, nodes: int, scatter: str, first: int, *blocks):
    from irfuse.api.mesh_calls import chunk_onto

    # (each block is one chunk's array from `to_delayed`, or a value given whole: a list given
    # for an array is the call's to read, not a blockwise list to unwrap)
    return chunk_onto(program, sums, nodes, scatter, first, *blocks)


def _node_count(program, bound: dict, nodes, needed: bool) -> int | None:
    """The mesh's number of nodes for the outputs' shapes: `nodes=` (checked as the mesh helpers
    check a node count), else the first nodal input's length, that input refused by name where it has none;
    None where neither tells, refused where `needed`."""
    from irfuse.mesh.order import check_node_count

    if nodes is not None:  # (whole, positive, below 2^31: as the mesh helpers check it)
        check_node_count("irfuse.dask.apply", nodes)
    for name in program.inputs:
        if name in program.nodal:
            a = bound[name]
            shape = getattr(a, "shape", None) if not isinstance(a, (list, tuple)) else np.shape(a)
            if not isinstance(shape, tuple) or not shape:
                raise UsageError(f"input '{name}' is a {type(a).__qualname__}, not an array of the mesh's nodes"
                                 if not isinstance(shape, tuple) else
                                 f"input '{name}' has shape {shape}; it holds a value for each of the mesh's nodes")
            if nodes is not None and nodes != shape[0]:
                raise UsageError(f"nodes={nodes} disagrees with nodal input '{name}', which holds {shape[0]} nodes")
            return int(shape[0])
    if nodes is None and needed:
        raise UsageError("the program has no nodal input to tell its number of nodes: pass nodes=M")
    return nodes


def _apply_stages(program, arrays: tuple, named: dict) -> Outputs:
    """A program over a mesh with nodal statements (`irfuse.api.staged_programs`) on Dask arrays:
    each pass over the nodes one task on the whole nodal arrays, the pass over the elements as
    any program over a mesh (`_apply_on_mesh`), in their order."""
    import dask
    import dask.array as da

    options = {k: named.pop(k) for k in ("nodes", "scatter") if k in named}
    bound = bind_inputs(program.inputs, arrays, named, program)
    nodes = _node_count(program, bound, options.get("nodes"), needed=True)  # (its node passes' shapes)
    made: dict[str, object] = {}
    whole = dask.delayed(_call_whole, pure=True)
    pick = dask.delayed(_pick, pure=True)
    for step, part in zip(program.stages, program.programs):
        given = {k: made[k] if k in made and k not in bound else bound[k] for k in step.inputs}
        if step.over == "elements":
            made.update(zip(step.outputs, _apply_on_mesh(part, (), {**given, **options, "nodes": nodes})))
            continue
        results = whole(part, *(a.rechunk(-1).to_delayed().reshape(-1)[0] if isinstance(a, da.Array) else a
                                for a in given.values()))
        for name in step.outputs:
            shape = part.shapes[name] if name in part.uniform else (nodes, *part.shapes[name])
            made[name] = da.from_delayed(pick(results, name), shape=shape, dtype=part.dtype)
    return Outputs(program.outputs, [made[k] for k in program.outputs])


def _call_whole(program: Program, *arrays) -> dict:
    """A pass over the nodes on its whole arrays: its outputs by name."""
    return dict(zip(program.outputs, program(*arrays)))


def _whole_groups(chunks: tuple[int, ...], align: int) -> tuple[int, ...]:
    """Chunks of the elements whose every boundary is moved down to a multiple of `align`
    (the elements a scatter adds in one group: chunks of whole groups give one call's bits)."""
    ends = sorted({(end // align) * align for end in np.cumsum(chunks)[:-1]} - {0})
    bounds = [0, *ends, int(sum(chunks))]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]) if b > a)


def _apply_on_mesh(program: Program, arrays: tuple, named: dict) -> Outputs:
    """A program over a mesh on Dask arrays chunked along its elements (see the module): one
    task a chunk, each after the one before it."""
    import dask
    import dask.array as da

    from irfuse.api.mesh_calls import scatter_mode

    nodes, scatter = named.pop("nodes", None), scatter_mode(named.pop("scatter", None))
    bound = bind_inputs(program.inputs, arrays, named, program)
    m = _node_count(program, bound, nodes, needed=any(name in program.nodal for name in program.outputs))
    chunked = [k for k in program.inputs if k not in program.uniform and k not in program.nodal]
    for name in chunked:
        if not isinstance(bound[name], da.Array):
            raise UsageError(f"input '{name}' is a {type(bound[name]).__qualname__}, not a Dask array "
                             "(dask.array.from_array makes one): a program over a mesh takes its connectivities "
                             "and per-element inputs chunked along the elements")
    first = bound[chunked[0]]
    if first.shape[0] == 0:
        from irfuse.api.mesh_calls import NO_ELEMENTS

        raise UsageError(NO_ELEMENTS)
    n, chunks = first.shape[0], _whole_groups(first.chunks[0], program.artifact.host.align)
    whole: dict[str, object] = {}
    for name in program.inputs:
        a = bound[name]
        if name in chunked:
            if a.ndim < 1 or a.shape[0] != n:
                raise UsageError(f"input '{name}' has shape {a.shape}; its first axis must hold the {n} elements of "
                                 f"input '{chunked[0]}'")
            continue
        whole[name] = a.rechunk(-1).to_delayed().reshape(-1)[0] if isinstance(a, da.Array) else a
    blocks = {name: bound[name].rechunk({0: chunks, **{k: -1 for k in range(1, bound[name].ndim)}})
              .to_delayed().reshape(-1) for name in chunked}
    step = dask.delayed(_chunk_onto, pure=True, nout=2)
    pick = dask.delayed(_pick, pure=True)
    sums, parts = None, {name: [] for name in program.outputs if name not in program.nodal}
    for c, length in enumerate(chunks):
        args = [blocks[name][c] if name in blocks else whole[name] for name in program.inputs]
        per_element, sums = step(program, sums, nodes, scatter, sum(chunks[:c]), *args)
        for name in parts:
            parts[name].append(da.from_delayed(pick(per_element, name), shape=(length, *program.shapes[name]),
                                               dtype=program.dtype))
    out = {name: da.concatenate(p) for name, p in parts.items()}
    for name in program.outputs:
        if name in program.nodal:
            out[name] = da.from_delayed(pick(sums, name), shape=(m, *program.shapes[name]), dtype=program.dtype)
    return Outputs(program.outputs, [out[k] for k in program.outputs])
