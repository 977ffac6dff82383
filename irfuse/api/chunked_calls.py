"""Calls on NumPy arrays that run in chunks: host arrays on the GPU, or any call given a
device-memory budget (`irfuse.runtime.streaming`). Chunks are copied into buffers of their
own, so the contiguous kernels run whatever views the caller passed; the run recorded for a
chunk length is kept with the program's other recorded runs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irfuse.api.host_calls import may_overlap
from irfuse.diagnostics import ExecutionError
from irfuse.runtime.streaming import ChunkedRun, chunk_elements, device_budget


def run_in_chunks(program, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray],
                  budget: int | None, progress: Callable[[int, int], None] | None) -> int:
    """Runs `program` over the batch in chunks within `budget` bytes of device memory (on the
    GPU by default half of its free memory); returns how many chunks it took."""
    if program.strides:  # `_view_strides` never chooses a strided variant for chunks
        raise ExecutionError(f"{program.name}: kernels compiled for strided views were about to read chunks")
    dev = program.opened_device()
    chunk = chunk_elements(program.artifact, n, device_budget(dev, budget))
    if any(may_overlap(o, a) for o in results.values() for a in arrays.values()):
        arrays = {k: a.copy() for k, a in arrays.items()}  # a chunk's results must not reach later inputs
    run = program.recorded(("chunks", chunk), lambda: ChunkedRun(program.artifact, dev, chunk, program.inputs,
                                                                  program.outputs, program.shapes, program.layout))
    return run.run(arrays, results, n, progress)
