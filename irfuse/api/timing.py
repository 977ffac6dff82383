"""Timing a program's runs on given arrays (`Program.time`, what `irfuse run` reports).

On GPU arrays the run is the CUDA graph a call on those very arrays submits once its launches
are captured (the second call captures it): each timing is CUDA events around one graph launch
from an idle GPU, the device time of one call and its launch. On NumPy arrays in one piece on
the CPU backend each timing is the wall time of one replay of the run recorded for them; a
call in chunks (NumPy arrays on the GPU, or a memory budget) is timed whole, end to end from
host memory, and so is a call of a program over a mesh (`time_calls`). Every timing is of a
run that gives the same outputs as the call before it."""

from __future__ import annotations

import time

from irfuse.api.device_arrays import DeviceArray, device_array, first_array, stream_handle
from irfuse.api.host_calls import run_on_host
from irfuse.diagnostics import check_whole


RUNS_MOST = 1_000_000  # runs a `time` call takes, each count (a larger one is a mistake, not a wait)


def _check_counts(repeat, warmup) -> None:
    check_whole("time: repeat (runs timed)", repeat, 0, RUNS_MOST)
    check_whole("time: warmup (runs before them)", warmup, 0, RUNS_MOST)


def time_calls(program, args: tuple, named: dict, out, repeat: int, warmup: int = 1, **options) -> list[float]:
    """Seconds of each of `repeat` calls after `warmup` more, each end to end: from an idle
    GPU (or host) to its outputs written, the host's work in the call included. What a
    program over a mesh is timed by (its calls check and prepare what they are given, and one
    of several passes runs a program a pass); `options` go to every call (`nodes=`,
    `scatter=`, `memory_budget=`)."""
    _check_counts(repeat, warmup)
    outputs = program(*args, out=out, **options, **named)  # (compiles, prepares, records)
    gpu = any(isinstance(v, DeviceArray) or device_array(v) is not None for v in (*args, *named.values()))
    dev = program.opened_device() if gpu else None
    times = []
    for k in range(warmup + repeat):
        if dev is not None:
            dev.synchronize()
        t0 = time.perf_counter()
        program(*args, out=outputs if out is None else out, **options, **named)
        if dev is not None:
            dev.synchronize()
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def time_runs(program, args: tuple, named: dict, out, repeat: int, warmup: int = 1,
              memory_budget: int | None = None) -> list[float]:
    """Seconds of each of `repeat` runs after `warmup` more (see the module)."""
    _check_counts(repeat, warmup)
    arrays, n, layout = program._arrays(args, named)
    chunked = program._chunked(arrays, memory_budget)
    target = program._for(layout, program._view_strides(arrays, out, layout, chunked))
    if target is not program:
        return time_runs(target, args, named, out, repeat, warmup, memory_budget)
    first = first_array(arrays)
    if chunked or not n:
        times = []
        for k in range(warmup + repeat):
            t0 = time.perf_counter()
            program(*args, out=out, memory_budget=memory_budget, **named)
            if k >= warmup:
                times.append(time.perf_counter() - t0)
        return times
    if isinstance(first, DeviceArray):
        outputs = program(*args, out=out, **named)
        outputs = program(*args, out=outputs if out is None else out, **named)  # captures the graph
        run = program._bound[("gpu", n)]
        key = next(reversed(run.graphs))
        graph, handle = run.graphs[key], stream_handle(None, first)
        dev = program.opened_device()
        times = []
        for k in range(warmup + repeat):
            dev.synchronize()
            with dev.timer() as t:
                graph.graph.launch_on(handle)
            if k >= warmup:
                times.append(t.seconds)
        return times
    results = {name: a for name, a in program(*args, out=out, **named).items()}
    times = []
    for k in range(warmup + repeat):
        t0 = time.perf_counter()
        run_on_host(program, arrays, n, results)
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return times
