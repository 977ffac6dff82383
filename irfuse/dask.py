"""Programs applied to Dask arrays chunked along the batch axis.

    import dask.array as da
    import irfuse, irfuse.dask

    prog = irfuse.compile("stvenant.kas")
    outs = irfuse.dask.apply(prog, T4, Mf, phi, M1, w)   # Dask arrays in, Dask arrays out
    outs.vec3nodestiff.compute()

Every element is independent, so each chunk of the batch is one task: the program called
on the chunk's blocks (NumPy arrays, or CuPy arrays on GPU workers), where the worker holds
them; blocks never travel through the client. The program reaches a worker as what it was
compiled from (`Program.__reduce__`), and each worker process compiles it once (or loads
it from the disk cache) and keeps it. Inputs are chunked along the batch axis (the first
axis of arrays of structures, the last of structures of arrays) alike; an input chunked
otherwise is rechunked to the first input's batch chunks, whole along its value axes.
A uniform input (one value for the whole batch: a Dask or NumPy array shaped as the value)
goes whole to every task, and a uniform output that only uniform inputs make is the first
task's. A program that reduces over the batch is refused: a chunk alone cannot give its
reduction, nor what depends on it.
Requires the `dask` extra (`pip install irfuse[dask]`: dask, distributed, dask-cuda).
"""

from __future__ import annotations

from irfuse.api.arguments import bind_inputs, call_layout
from irfuse.api.programs import Outputs, Program
from irfuse.diagnostics import UsageError
from irfuse.dialects.layouts import AOS, batch_shape
from irfuse.runtime.reference import has_reductions


def _run_chunk(program: Program, *blocks) -> Outputs:
    return program(*blocks)


def apply(program: Program, *arrays, **named) -> Outputs:
    """`program` over Dask arrays (positional in its `input` order, or by name); its outputs
    as Dask arrays chunked like the inputs' batch axis, by name or position (`Outputs`)."""
    import dask
    import dask.array as da

    if not isinstance(program, Program):
        raise UsageError(f"irfuse.dask.apply takes a Program (irfuse.compile), not a {type(program).__qualname__}")
    if has_reductions(program.compiled.reference_program):
        raise UsageError(f"{program.name} reduces over the batch (sum, max or min), which irfuse.dask.apply, running "
                         "each chunk of the batch by itself, cannot give: call the program on whole arrays")
    bound = bind_inputs(program.inputs, arrays, named)
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
    blocks = {}
    for name, a in uniform.items():  # one block, read by every task
        blocks[name] = [a.rechunk(-1).to_delayed().reshape(-1)[0] if isinstance(a, da.Array) else a] * len(batch_chunks)
    for name, a in batches.items():
        if a.ndim != len(program.shapes[name]) + 1 or a.shape[axis] != n:
            raise UsageError(f"input '{name}' has shape {a.shape}; in this call's layout it must be "
                             f"{batch_shape(layout, program.shapes[name], n)} (the batch length of input "
                             f"'{first_name}')")
        whole = {k: -1 for k in range(a.ndim) if k != axis % a.ndim}
        a = a.rechunk({**whole, axis % a.ndim: batch_chunks})
        blocks[name] = a.to_delayed().reshape(-1)
    run = dask.delayed(_run_chunk, pure=True)
    parts: dict[str, list] = {k: [] for k in program.outputs}
    for i, m in enumerate(batch_chunks):
        result = run(program, *[blocks[k][i] for k in program.inputs])
        for k in program.outputs:
            shape = program.shapes[k] if k in program.uniform else batch_shape(layout, program.shapes[k], m)
            parts[k].append(da.from_delayed(result[k], shape=shape, dtype=program.dtype))
    return Outputs(program.outputs, [parts[k][0] if k in program.uniform else da.concatenate(parts[k], axis=axis)
                                     for k in program.outputs])
