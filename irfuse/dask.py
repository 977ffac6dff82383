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
Requires the `dask` extra (`pip install irfuse[dask]`: dask, distributed, dask-cuda).
"""

from __future__ import annotations

from irfuse.api.arguments import bind_inputs, call_layout
from irfuse.api.programs import Outputs, Program
from irfuse.diagnostics import UsageError
from irfuse.dialects.layouts import AOS, batch_shape


def _run_chunk(program: Program, *blocks) -> Outputs:
    return program(*blocks)


def apply(program: Program, *arrays, **named) -> Outputs:
    """`program` over Dask arrays (positional in its `input` order, or by name); its outputs
    as Dask arrays chunked like the inputs' batch axis, by name or position (`Outputs`)."""
    import dask
    import dask.array as da

    if not isinstance(program, Program):
        raise UsageError(f"irfuse.dask.apply takes a Program (irfuse.compile), not a {type(program).__qualname__}")
    bound = bind_inputs(program.inputs, arrays, named)
    for name, a in bound.items():
        if not isinstance(a, da.Array):
            raise UsageError(f"input '{name}' is a {type(a).__qualname__}, not a Dask array (dask.array.from_array "
                             "makes one)")
    layout = call_layout(bound, program.shapes, program.layout)
    axis = 0 if layout == AOS else -1
    first = bound[program.inputs[0]]
    n = first.shape[axis]
    batch_chunks = first.chunks[axis]
    blocks = {}
    for name, a in bound.items():
        if a.ndim != len(program.shapes[name]) + 1 or a.shape[axis] != n:
            raise UsageError(f"input '{name}' has shape {a.shape}; in this call's layout it must be "
                             f"{batch_shape(layout, program.shapes[name], n)} (the batch length of input "
                             f"'{program.inputs[0]}')")
        whole = {k: -1 for k in range(a.ndim) if k != axis % a.ndim}
        a = a.rechunk({**whole, axis % a.ndim: batch_chunks})
        blocks[name] = a.to_delayed().reshape(-1)
    run = dask.delayed(_run_chunk, pure=True)
    parts: dict[str, list] = {k: [] for k in program.outputs}
    for i, m in enumerate(batch_chunks):
        result = run(program, *[blocks[k][i] for k in program.inputs])
        for k in program.outputs:
            parts[k].append(da.from_delayed(result[k], shape=batch_shape(layout, program.shapes[k], m),
                                            dtype=program.dtype))
    return Outputs(program.outputs, [da.concatenate(parts[k], axis=axis) for k in program.outputs])
