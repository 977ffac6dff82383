"""`irfuse.time_loop`: many steps of one program on one device, the outputs named in `carry`
fed back as the next step's inputs.

The first step reads the caller's arrays and writes outputs made in their library (as a
call without `out=` does); every later step reads the carried values from one set of buffers
and writes them into another, the two swapped between steps, so nothing is copied and the
caller's inputs are never written. Outputs that are not carried are written again at every
step; the last step's outputs are returned. Every step is the same call a Python loop would
make, so the bits are those of the steps called one by one, on either backend.

On GPU arrays the loop runs on a stream of irfuse's own (the device's `loop_stream`),
ordered after the work the caller's stream holds and the caller's stream after the loop, as
a CUDA graph: after two steps have prepared the runs of both sets of buffers,
`CAPTURED_STEPS` steps (an even number: they start and end in the same buffers) are captured
once into one graph, which is launched as often as the steps allow, the remaining steps
called one by one. The host pays one launch per `CAPTURED_STEPS` steps instead of a call per
step, and the GPU runs the steps back to back. A step that cannot be captured (a
connectivity given as a GPU array, structures of arrays: `NotCapturable`) runs the loop call
by call. The loop returns once its work is queued, as a call does; the graph (and the
buffers it uses) is let go once the stream has run it (an event that later loops query).
Host arrays run the steps call by call.
"""

from __future__ import annotations

import numpy as np

from irfuse.api.device_arrays import device_array, empty_like_family, stream_handle
from irfuse.api.outputs import Outputs
from irfuse.diagnostics import NotCapturable, UsageError

CAPTURED_STEPS = 16  # steps one captured graph holds (even)


def check_carry(program, carry, where: str = "time_loop") -> None:
    """Refuses a `carry` that is not a non-empty mapping of inputs to the outputs that feed
    them, each pair of the same kind (nodal, per-element, uniform) and shape."""
    if not isinstance(carry, dict) or not carry:
        raise UsageError(f"{where}: carry maps inputs to the outputs that feed them the next step, e.g. {{'u': 'u1'}}")
    for i, o in carry.items():
        if i not in program.inputs or o not in program.outputs:
            raise UsageError(f"{where}: carry {i!r}: {o!r} maps an input of {program.name} "
                             f"({', '.join(program.inputs)}) to an output ({', '.join(program.outputs)})")
        kinds = ["nodal" if k in program.nodal else "uniform" if k in program.uniform else "per-element"
                 for k in (i, o)]
        if kinds[0] != kinds[1] or program.shapes[i] != program.shapes[o] or i in program.index_inputs:
            raise UsageError(f"{where}: carry {i!r}: {o!r} feeds {kinds[1]} values shaped {program.shapes[o]} "
                             f"to {kinds[0]} input {i!r} shaped {program.shapes[i]}")
    if len(set(carry.values())) < len(carry):
        raise UsageError(f"{where}: carry feeds one output to two inputs; each carried output feeds one input")


def check_steps(steps, where: str = "time_loop") -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise UsageError(f"{where}: steps is a positive whole number, not {steps!r}")
    return int(steps)


def time_loop(program, steps: int, carry: dict, *arrays, stream=None, nodes: int | None = None,
              scatter: str | None = None, **named) -> Outputs:
    """`steps` calls of `program` (a compiled program, over a mesh or not), each taking as the
    inputs named in `carry` the outputs they map to (`{"u": "u1", "v": "v1"}`), the others as
    given (positionally in the program's input order, or by name); the last step's outputs
    (see the module). `stream=`, `nodes=`, `scatter=`: as for a call."""
    from irfuse.api.arguments import bind_inputs

    steps = check_steps(steps)
    check_carry(program, carry)
    bound = bind_inputs(program.inputs, arrays, named, program)
    options = {k: v for k, v in (("nodes", nodes), ("scatter", scatter)) if v is not None}
    model = next((a for a in map(device_array, bound.values()) if a is not None), None)
    if model is None or program.backend != "cuda" or model.family in ("jax", "jaxlib"):
        return _loop(program, steps, carry, bound, options, stream, None)
    # On the GPU: every step on the device's loop stream, ordered after the caller's stream's
    # work so far, the caller's stream after the loop.
    own = program.opened_device().loop_stream()
    handle = stream_handle(stream, model)
    own.after(handle)
    try:
        return _loop(program, steps, carry, bound, options, own.handle, own)
    finally:
        own.before(handle)


def _loop(program, steps: int, carry: dict, bound: dict, options: dict, stream, own) -> Outputs:
    """The steps (see `time_loop`) on `stream`; on the GPU (`own`: the loop stream) in
    captured graphs where the steps allow."""
    first = program(**bound, stream=stream, **options)
    if steps == 1:
        return first
    current = dict(zip(program.outputs, first))
    spare = {o: _like(program, current[o]) for o in carry.values()}
    inputs = dict(bound)

    def step(on=stream) -> None:
        for i, o in carry.items():
            inputs[i] = current[o]
        program(**inputs, out={o: spare.get(o, current[o]) for o in program.outputs}, stream=on, **options)
        for o in spare:
            current[o], spare[o] = spare[o], current[o]

    done = 1
    if own is not None and steps - done >= 2 + CAPTURED_STEPS:
        step()
        step()  # (the runs of both sets of buffers prepared)
        done += 2
        graph = _captured(program, step, CAPTURED_STEPS, own.handle)
        if graph is not None:
            while steps - done >= CAPTURED_STEPS:
                graph.launch_on(own.handle)
                done += CAPTURED_STEPS
            graph.keep = (dict(current), dict(spare))  # (the buffers it reads and writes: until it has run)
            graph.destroy_after(own.handle)
    while done < steps:
        step()
        done += 1
    return Outputs(program.outputs, [current[o] for o in program.outputs])


def _like(program, a):
    """A new array for a carried output's other buffer: as `a`, in its library (or NumPy)."""
    d = device_array(a)
    if d is None:
        from irfuse.runtime.cpu_device import page_aligned

        return page_aligned(a.shape, a.dtype)
    if d.family in ("jax", "jaxlib"):
        raise UsageError("time_loop: JAX arrays cannot be written in place, so their steps cannot feed each other's "
                         "buffers: loop over the calls, or use jax.lax.fori_loop with irfuse.jax's operator")
    return empty_like_family(d, d.shape, d.dtype).obj


def _captured(program, step, count: int, handle: int):
    """`count` steps captured on stream `handle` into one CUDA graph
    (`runtime.cuda_graph.CapturedWork`), or None where a step cannot be captured."""
    from irfuse.runtime.cuda_graph import CapturedWork

    try:
        return CapturedWork(lambda on: [step(on) for _ in range(count)], handle)
    except NotCapturable:
        return None
