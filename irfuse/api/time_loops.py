"""`irfuse.time_loop`: many steps of one program on one device, the outputs named in `carry`
fed back as the next step's inputs.

Every step is the same call a Python loop would make, so the bits are those of the steps
called one by one, on either backend; the caller's arrays are never written, and the last
step's outputs come back as new arrays in the caller's library.

On the CPU (and where a step cannot be captured) the first step reads the caller's arrays
and writes outputs made in their library, as a call without `out=` does; every later step
reads the carried values from one set of buffers and writes them into another, the two
swapped between steps, so nothing is copied.

On GPU arrays the loop runs on a stream of irfuse's own (the device's `loop_stream`),
ordered after the work the caller's stream holds and the caller's stream after the loop, as
CUDA graphs kept between loops (`KeptLoop`): for a program and its arguments (the arrays it
reads in place, by address, and the values of its host scalars) the loop keeps two sets of
buffers for the carried values, one for the other outputs, and graphs captured once: of
`CAPTURED_STEPS` steps (an even number: they start and end in the same set) and of one step
from each set into the other. A loop copies the caller's carried inputs into the first set
(where they are not plain contiguous arrays, it runs call by call), launches the graphs the
steps need, and copies the last values out into new arrays.
So a loop made again on the same arguments costs the host a few launches and copies, not a
call a step, whatever its number of steps. A step that cannot be captured (a connectivity
given as a GPU array, structures of arrays: `NotCapturable`) runs the loop call by call.
The loop returns once its work is queued, as a call does.
"""

from __future__ import annotations

import numpy as np

from irfuse.api.device_arrays import device_array, empty_like_family, stream_handle
from irfuse.api.outputs import Outputs
from irfuse.diagnostics import NotCapturable, UsageError, is_whole

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
    """`steps` as an int: a positive whole number that a 64-bit count holds (the counts the
    loop keeps, and its graphs' replays, are 64-bit)."""
    if not is_whole(steps) or not 1 <= steps < 2**63:
        raise UsageError(f"{where}: steps is a positive whole number below 2^63, not {steps!r}")
    return int(steps)


def time_loop(program, steps: int, carry: dict, *arrays, stream=None, nodes: int | None = None,
              scatter: str | None = None, **named) -> Outputs:
    """`steps` calls of `program` (a compiled program, over a mesh or not), each taking as the
    inputs named in `carry` the outputs they map to (`{"u": "u1", "v": "v1"}`), the others as
    given (positionally in the program's input order, or by name); the last step's outputs
    (see the module). `stream=`, `nodes=`, `scatter=`: as for a call."""
    from irfuse.api.arguments import bind_inputs

    if not all(hasattr(program, k) for k in ("inputs", "outputs", "shapes", "nodal")):  # (Program, StagedProgram)
        raise UsageError(f"time_loop takes a compiled program (irfuse.compile), not a {type(program).__name__}")
    steps = check_steps(steps)
    check_carry(program, carry)
    bound = bind_inputs(program.inputs, arrays, named, program)
    options = {k: v for k, v in (("nodes", nodes), ("scatter", scatter)) if v is not None}
    model = next((a for a in map(device_array, bound.values()) if a is not None), None)
    if model is None or program.backend != "cuda" or model.family in ("jax", "jaxlib"):
        return _loop(program, steps, carry, bound, options, stream)
    # On the GPU: every step on the device's loop stream, ordered after the caller's stream's
    # work so far, the caller's stream after the loop.
    own = program.opened_device().loop_stream()
    handle = stream_handle(stream, model)
    own.after(handle)
    try:
        key, kept = _loop_key(program, carry, bound, options)
        loops = program.__dict__.setdefault("_time_loops", {})
        loop = loops.get(key)
        if loop is None:
            first = program(**bound, stream=own.handle, **options)  # (the first step: every check)
            if steps == 1:
                return first
            loop = KeptLoop(program, carry, options, bound, first, kept, own)
            if len(loops) >= LOOPS_KEPT:  # (the oldest let go once the stream has run its graphs)
                loops.pop(next(iter(loops))).release(own.handle)
            loops[key] = loop
            if not loop.capturable:
                return _loop(program, steps - 1, carry, bound, options, own.handle, first)
            loop.start({i: first[o] for i, o in carry.items()}, own)
            return loop.run(steps - 1, 0, own)
        if steps == 1 or not loop.capturable or not loop.copies_in(bound):  # (call by call)
            return _loop(program, steps, carry, bound, options, own.handle)
        loop.start(bound, own)
        return loop.run(steps, 0, own)
    finally:
        own.before(handle)


def _loop(program, steps: int, carry: dict, bound: dict, options: dict, stream, first=None) -> Outputs:
    """The steps (see `time_loop`) on `stream`, call by call (`first`: the first step's outputs,
    where it has been made)."""
    if first is None:
        first = program(**bound, stream=stream, **options)
        steps -= 1
    if steps == 0:
        return first
    current = dict(zip(program.outputs, first))
    spare = {o: _like(program, current[o]) for o in carry.values()}
    inputs = dict(bound)
    for _ in range(steps):
        for i, o in carry.items():
            inputs[i] = current[o]
        program(**inputs, out={o: spare.get(o, current[o]) for o in program.outputs}, stream=stream, **options)
        for o in spare:
            current[o], spare[o] = spare[o], current[o]
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


LOOPS_KEPT = 4  # loops a program keeps (the oldest let go first)


def _loop_key(program, carry: dict, bound: dict, options: dict) -> tuple[tuple, list]:
    """(what makes a kept loop's graphs right for these arguments, what they read in place):
    the carry and options, each GPU array the steps read in place by address, shape and type
    (and kept alive with the loop), each connectivity prepared as a `Connectivity` by
    identity, each carried input by shape and type only (it is copied in), host values by
    their bytes (a graph holds the words its scalars are written with)."""
    parts: list = [tuple(carry.items()), tuple(sorted(options.items()))]
    kept = []
    for name, value in bound.items():
        d = device_array(value)
        if name in carry:
            parts.append((name, "carried", None if d is None else (d.shape, d.dtype.str, d.family)))
        elif d is not None:
            parts.append((name, d.ptr, d.shape, d.strides, d.dtype.str, d.family, d.device))
            kept.append(value)
        elif hasattr(value, "on_device"):  # (an irfuse.mesh.Connectivity)
            parts.append((name, "connectivity", id(value)))
            kept.append(value)
        else:
            a = np.asarray(value)
            parts.append((name, a.dtype.str, a.shape, a.tobytes()))
    return tuple(parts), kept


class KeptLoop:
    """What a time loop of `program` on one set of arguments keeps between loops (see the
    module): `sets`, two dicts of buffers for the carried outputs; `rest`, the buffers of the
    outputs not carried; `graphs[(count, parity)]`, `count` steps captured from set `parity`
    (made when first needed); `kept`, the arrays the graphs read in place."""

    def __init__(self, program, carry: dict, options: dict, bound: dict, first, kept: list, own):
        self.program, self.carry, self.options, self.kept = program, carry, options, kept
        outputs = dict(zip(program.outputs, first))
        carried = set(carry.values())
        self.sets = [{o: _like(program, outputs[o]) for o in carried} for _ in range(2)]
        self.rest = {o: _like(program, a) for o, a in outputs.items() if o not in carried}
        self.inputs = {name: value for name, value in bound.items() if name not in carry}
        self.graphs: dict[tuple[int, int], object] = {}
        # Both sets' runs prepared by a step each (on what the buffers hold: their values are
        # written over before any is read back), so that no capture does a first call's work.
        self.capturable = True
        self._step(0, own.handle)
        self._step(1, own.handle)
        try:
            self._graph(1, 0, own)
        except NotCapturable:
            self.capturable = False

    def _step(self, parity: int, stream) -> None:
        """One step reading set `parity`, writing the other."""
        source, target = self.sets[parity], self.sets[1 - parity]
        inputs = {**self.inputs, **{i: source[o] for i, o in self.carry.items()}}
        self.program(**inputs, out={o: target.get(o, self.rest.get(o)) for o in self.program.outputs},
                     stream=stream, **self.options)

    def _graph(self, count: int, parity: int, own):
        graph = self.graphs.get((count, parity))
        if graph is None:
            from irfuse.runtime.cuda_graph import CapturedWork

            graph = self.graphs[(count, parity)] = CapturedWork(
                lambda on: [self._step((parity + k) % 2, on) for k in range(count)], own.handle)
        return graph

    def copies_in(self, bound: dict) -> bool:
        """Whether every carried input is a contiguous GPU array shaped and typed as its set's
        buffer (copied in, byte for byte)."""
        for i, o in self.carry.items():
            d, b = device_array(bound[i]), device_array(self.sets[0][o])
            if d is None or not d.contiguous or d.shape != b.shape or d.dtype != b.dtype:
                return False
        return True

    def start(self, carried: dict, own) -> None:
        """The carried inputs' values (input -> a plain GPU array: `copies_in`) into set 0."""
        for i, o in self.carry.items():
            d, b = device_array(carried[i]), device_array(self.sets[0][o])
            own.copy(b.ptr, d.ptr, b.nbytes)

    def run(self, steps: int, parity: int, own) -> Outputs:
        """`steps` steps from set `parity` by the kept graphs; the last outputs copied out."""
        while steps >= CAPTURED_STEPS:
            self._graph(CAPTURED_STEPS, parity, own).launch_on(own.handle)
            steps -= CAPTURED_STEPS
        for _ in range(steps):
            self._graph(1, parity, own).launch_on(own.handle)
            parity = 1 - parity
        results = []
        for o in self.program.outputs:
            b = self.sets[parity].get(o, self.rest.get(o))
            new = _like(self.program, b)
            own.copy(device_array(new).ptr, device_array(b).ptr, device_array(b).nbytes)
            results.append(new)
        return Outputs(self.program.outputs, results)

    def release(self, handle: int) -> None:
        """Lets the graphs go once stream `handle` has run them."""
        for graph in self.graphs.values():
            graph.keep = (self.sets, self.rest, self.kept)
            graph.destroy_after(handle)
        self.graphs = {}


def let_go_of_loops(program) -> None:
    """The loops `program` keeps, let go (its `close`: the graphs launch kernels of its devices)."""
    for loop in program.__dict__.pop("_time_loops", {}).values():
        for graph in loop.graphs.values():
            graph.destroy()  # (one still running is freed by the driver once it is done)
        loop.graphs = {}
