"""`Program`: a compiled KAS program called like a function on arrays.

A call binds its arguments (by position in the program's `input` order, or by name),
checks them (`arguments`), picks the variant of the program compiled for the arrays'
layout and strides, and runs one of three strategies, each in a module of its own:
- `gpu_calls`: GPU arrays, read and written in place on the caller's stream (captured graphs,
  dependent launches, a fast path for the very same arrays again);
- `chunked_calls`: NumPy arrays on the GPU, or any call with a device-memory budget: the batch
  in chunks through the device (`runtime.streaming`);
- `host_calls`: NumPy arrays in one piece on the CPU backend, in place where they can be,
  else copied.
Each strategy replays a run recorded once per batch size (or chunk length), kept by the
program (`recorded`); nothing is verified unless asked (`check`, `verify=True`:
`verification`, which needs the compiler's side; running does not). A program holds the
`Artifact` it runs; `compiled` gives it with its IR (parsed on first use where the artifact
came from the disk cache).
"""

from __future__ import annotations

import atexit
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from irfuse.api.arguments import (bind_inputs, bind_outputs, call_layout, check_array, check_output_array,
                                  check_uniform_array, host_array, host_scalar, names_every_output, same_batch_length)
from irfuse.api.chunked_calls import run_in_chunks
from irfuse.api.device_arrays import (ALIGNMENT, DeviceArray, check_device_array, device_array, empty_like_family,
                                      first_array, moved_batch_axis)
from irfuse.api.gpu_calls import GpuInPlaceRun, call_on_gpu, gpu_out_array
from irfuse.api.host_calls import (aligned_copy, keep_fast_call, may_overlap, refuse_overlapping_outputs,
                                   run_on_host)
from irfuse.api.outputs import Outputs
from irfuse.api.progress import progress_bar
from irfuse.api.verification import Verification, verify_on_device, verify_on_host
from irfuse.artifact.arrays import OUTPUT_PREFIX, batch_length, batch_shape, check_layout, fits, natural_strides, \
    view_strides
from irfuse.artifact.artifact import Artifact
from irfuse.diagnostics import CompileError, ExecutionError, UsageError, check_whole, is_whole
from irfuse.runtime.cpu_device import page_aligned
from irfuse.runtime.executor import open_device
from irfuse.runtime.mesh_runs import MeshInPlaceRun
from irfuse.runtime.streaming import ChunkedRun

__all__ = ["Program", "Outputs", "Verification"]

BOUND_SIZES = 4  # batch sizes whose recorded runs (and their buffers) a program keeps

# Programs holding a device: closed at exit, before PyCUDA's own clean-up, which aborts the
# process if a context it pushed is still on the stack.
_holding_devices: "weakref.WeakSet[Program]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for program in list(_holding_devices):
        program.close()


def _overlapping_view(shape: tuple[int, ...], words: tuple[int, ...], layout: str) -> bool:
    """Whether two different positions of a view with these strides (words, batch axis
    first) may be the same word: each axis's stride must step over all the axes below it."""
    n = batch_length(shape, layout)
    dims = [n, *(shape[1:] if layout == "aos" else shape[:-1])]
    extent = 1
    for stride, dim in sorted(((abs(s), d) for s, d in zip(words, dims) if d > 1)):
        if stride < extent:
            return True
        extent = stride * (dim - 1) + extent
    return False


def _host_scalar(program, name: str, a) -> bool:
    """Whether argument `name` is a uniform scalar in host memory (which a call on GPU
    arrays takes beside them)."""
    return isinstance(a, np.ndarray) and a.ndim == 0 and name in program.uniform


def _check_budget(budget) -> None:
    """Refuses a `memory_budget=` that is not None or a whole number of bytes."""
    if budget is not None and not is_whole(budget):
        raise UsageError(f"memory_budget= takes a whole number of bytes, not {budget!r}")


def _check_progress(progress) -> None:
    """Refuses a `progress=` that is not False or a callable (True is turned into one first)."""
    if progress is not False and not callable(progress):
        raise UsageError(f"progress= takes True, False or a callable (done, total), not a {type(progress).__qualname__}")


def let_go_of_any_loops(program) -> None:
    """`time_loops.let_go_of_loops(program)` where a time loop may have been made: not
    imported otherwise (no loop was made without that module; a load need not import it)."""
    loops = sys.modules.get("irfuse.api.time_loops")
    if loops is not None:
        loops.let_go_of_loops(program)


class Program:
    """A compiled KAS program. Call it with one array per input in the program's element
    type, every one shaped `(N, *value shape)` (array of structures, the batch axis first)
    or every one `(*value shape, N)` (structure of arrays, the batch axis last); it returns
    `Outputs` in the inputs' layout. The kernels are compiled for `layout`; a call in the
    other layout runs a variant compiled for it on first use (`variant`). `inputs`,
    `outputs` and `shapes` say what it takes and gives."""

    def __init__(self, artifact: Artifact, backend: str, warnings: list,
                 variant: Callable[..., "Program"] | None = None, strides: dict | None = None):
        self.artifact = artifact
        self._compiled = None  # the artifact with its IR (`compiled`), made on first use
        self.backend = backend
        self.warnings = list(warnings)
        self.layout = artifact.layout
        # Inputs and outputs this program's kernels take as strided views (name -> strides in
        # words, batch axis first); the others are contiguous in `layout`.
        self.strides: dict[str, tuple[int, ...]] = dict(strides or {})
        self._variant = variant  # the program compiled for another layout or strides; None: refused
        self._variants: dict[tuple, Program] = {}
        self._host_views_copied = False  # set once kernels for host views failed to compile
        # (function, irfuse.compile's arguments) that compile it again, for pickling.
        self._spec: tuple | None = None
        self._phases: tuple | None = None  # (PhasePlan, programs): made by `phases`
        # Bytes of device memory a call on host arrays may use (None: on the GPU, half of the
        # free memory); `last_chunks`: how many chunks the last such call ran in.
        self.memory_budget: int | None = None
        self.last_chunks = 0
        host = artifact.host
        self.name = host.name
        self.inputs: tuple[str, ...] = host.input_names
        self.outputs: tuple[str, ...] = host.output_names
        self.shapes: dict[str, tuple[int, ...]] = host.shapes()
        self.dtype = np.dtype(artifact.element.numpy)
        # Inputs and outputs with one value for the whole batch: shaped as the value, no batch axis.
        self.uniform: frozenset[str] = host.uniform_names()
        # A program over a mesh: inputs and outputs with one value per node, and connectivities.
        self.nodal: frozenset[str] = host.nodal_names()
        self.index_inputs: frozenset[str] = host.index_names()
        self._device = None
        self._fast = None  # the last call on GPU arrays that launched a graph (`gpu_calls.FastCall`)
        self._host_fast: list = []  # the last calls in place on the CPU backend (`host_calls.HostFastCall`)
        self._mesh_fast: list = []  # the last calls over a mesh on GPU arrays (`mesh_gpu_calls.MeshGpuFastCall`)
        self._last_mesh_run = None  # (what the last such call ran, for its fast path)
        # Recorded runs by batch size (host arrays) or ("gpu", batch size) (GPU arrays in place).
        self._bound: OrderedDict = OrderedDict()
        self.lock = threading.Lock()  # held by a call while it runs on the program's device

    @property
    def compiled(self):
        """The artifact with its IR (`irfuse.driver.artifact.CompiledProgram`): what checking
        against the reference, phases and the IR itself need. Parsed from the texts the
        artifact keeps on first use where it came from the disk cache (needs the compiler)."""
        if self._compiled is None:
            from irfuse.driver.artifact import CompiledProgram

            self._compiled = CompiledProgram.from_artifact(self.artifact)
        return self._compiled

    @property
    def source(self) -> str:
        """The generated CUDA C (GPU kernels and their host versions)."""
        return self.artifact.source

    @property
    def kernels(self) -> list[str]:
        return [k.name for k in self.artifact.kernels]

    def __repr__(self) -> str:
        return (f"<irfuse.Program {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)}), "
                f"{self.dtype.name}{', structure of arrays' if self.layout == 'soa' else ''}, "
                f"{len(self.artifact.kernels)} kernel(s) on {self.backend}>")

    def for_layout(self, layout: str) -> "Program":
        """This program compiled for arrays in `layout` ('aos' or 'soa'): itself, or its
        variant, compiled on first use and kept."""
        try:
            check_layout(layout)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return self._for(layout, {})

    def _for(self, layout: str, strides: dict[str, tuple[int, ...]]) -> "Program":
        """The program for arrays in `layout` with these strided views: itself, or a variant
        compiled on first use and kept."""
        if layout == self.layout and strides == self.strides:
            return self
        key = (layout, tuple(sorted(strides.items())))
        program = self._variants.get(key)
        if program is None:
            if self._variant is None:
                what = f"in layout '{layout}'" if layout != self.layout else "that are strided views"
                raise UsageError(f"this program was compiled from a tuning result or read from a saved plan, for "
                                 f"contiguous arrays in layout '{self.layout}', which holds no plan for arrays {what}: "
                                 f"pass contiguous arrays in '{self.layout}' or compile the program from its source")
            program = self._variants[key] = self._variant(layout, strides)
        return program

    def _chunked(self, arrays: dict, memory_budget: int | None) -> bool:
        """Whether a call on these arrays runs in chunks (`runtime.streaming`): host arrays on
        the GPU, or with a device-memory budget. Chunks are copied into buffers of their own,
        so their kernels are the contiguous ones, whatever views the caller passed."""
        first = first_array(arrays)
        budget = memory_budget if memory_budget is not None else self.memory_budget
        return not isinstance(first, DeviceArray) and (self.backend == "cuda" or budget is not None)

    def _view_strides(self, arrays: dict, out, layout: str, chunked: bool = False) -> dict[str, tuple[int, ...]]:
        """The inputs and `out=` arrays that are strided views (name -> strides in words,
        batch axis first), where the kernels would read and write them in place: GPU arrays,
        and NumPy arrays on the CPU backend when no output shares memory with another array
        and the call is not `chunked` (else they are copied, as any host array may be)."""
        first = first_array(arrays)
        on_gpu = isinstance(first, DeviceArray)
        if first is None or chunked or not (on_gpu or self.backend == "cpu" and not self._host_views_copied):
            return {}
        given = {name: (name, a) for name, a in arrays.items()  # key in kas.strides -> (argument, array)
                 if name not in self.uniform}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                if name in self.uniform:
                    continue
                a = device_array(value) if on_gpu else value
                if isinstance(a, (DeviceArray, np.ndarray)) and fits(a.shape, self.shapes[name], layout):
                    given[OUTPUT_PREFIX + name] = (name, a)
        sig = {}
        for key, (name, a) in given.items():
            raw = a.strides if isinstance(a, DeviceArray) else (None if a.flags.c_contiguous else a.strides)
            words = view_strides(a.shape, raw, self.dtype.itemsize, layout)
            # A host array that starts off the kernels' alignment is read word by word too,
            # as a view of its natural strides (on the GPU such an array is refused).
            aligned = on_gpu or a.ctypes.data % self._alignment(layout) == 0
            natural = natural_strides(layout, self.shapes[name], batch_length(a.shape, layout))
            if words is None or (words == natural and aligned):
                continue  # strides of no whole words: refused later by name
            if key.startswith(OUTPUT_PREFIX) and _overlapping_view(a.shape, words, layout):
                raise UsageError(f"out= array for '{name}' is a view whose elements overlap (strides {words} in "
                                 "words, batch axis first): the kernels would write one place twice")
            sig[key] = words
        if sig and not on_gpu:
            outs = [a for key, (_, a) in given.items() if key.startswith(OUTPUT_PREFIX)]
            if any(may_overlap(o, b) for i, o in enumerate(outs) for b in [*arrays.values(), *outs[i + 1:]]):
                return {}
        return sig

    def _arrays(self, args: tuple, named: dict) -> tuple[dict, int, str]:
        """name -> NumPy array, or name -> `DeviceArray` (all inputs in one place), N, and the
        layout they are in."""
        bound = bind_inputs(self.inputs, args, named, self)
        arrays = {}
        for name, value in bound.items():
            a = device_array(value)
            if a is None and name in self.uniform and self.shapes[name] == ():
                a = host_scalar(f"input '{name}'", value, self.dtype)  # (None: not a number)
            arrays[name] = a if a is not None else host_array(f"input '{name}'", value, self.dtype)
        batch = {k: a for k, a in arrays.items() if k not in self.uniform}
        layout = call_layout(batch, self.shapes, self.layout)
        lengths: dict[str, int] = {}
        for name, a in arrays.items():
            if name in self.uniform:
                check_uniform_array(f"input '{name}'", a, self.shapes[name], self.dtype)
                if isinstance(a, np.ndarray) and not (a.flags.c_contiguous and a.ctypes.data % ALIGNMENT == 0):
                    arrays[name] = aligned_copy(a)  # a few words: read whole by every block
            else:
                lengths[name] = check_array(f"input '{name}'", a, self.shapes[name], self.dtype, None, layout)
        n = same_batch_length(lengths)
        if n is None:
            n = 1  # uniform inputs only: the program computes one value, once
        if n == 0:
            uniform_out = [name for name in self.outputs if name in self.uniform]
            if uniform_out:
                raise UsageError(f"the inputs hold 0 elements and output '{uniform_out[0]}' holds one value for the "
                                 "whole batch, which a batch of no elements does not define (a maximum over "
                                 "no elements has no value): pass at least one element")
        on_gpu = [k for k, a in arrays.items() if isinstance(a, DeviceArray)]
        # (a uniform scalar on the host goes to the kernels in the order of the call's stream:
        # `gpu_scalars`)
        on_host = [k for k, a in arrays.items() if not isinstance(a, DeviceArray) and not _host_scalar(self, k, a)]
        if on_gpu and on_host:
            host = on_host[0]
            raise UsageError(f"input '{on_gpu[0]}' is on the GPU and input '{host}' in host memory: pass every "
                             "input in one place (irfuse copies nothing between them behind your back)")
        if on_gpu:
            if self.backend != "cuda":
                raise UsageError(f"input '{on_gpu[0]}' is a GPU array and this program was compiled for the "
                                 f"{self.backend} backend: compile it with backend='cuda'")
            for k, a in arrays.items():
                if not isinstance(a, DeviceArray):
                    continue  # a scalar on the host
                check_device_array(f"input '{k}'", a, 0, self._alignment(layout))
                if k in self.uniform and not a.contiguous:
                    raise UsageError(f"input '{k}' is a strided view; a uniform input is read whole: pass a "
                                     "contiguous array")
        return arrays, n, layout

    def _alignment(self, layout: str) -> int:
        """Bytes a GPU array's address must be a multiple of: the 16-byte copies of
        array-of-structures kernels, one word for structure-of-arrays ones."""
        return ALIGNMENT if layout == "aos" else self.dtype.itemsize

    def _shape(self, name: str, n: int) -> tuple[int, ...]:
        if name in self.uniform:
            return self.shapes[name]
        return batch_shape(self.layout, self.shapes[name], n)

    def _host_out(self, what: str, name: str, value, n: int, layout: str) -> np.ndarray:
        """An `out=` NumPy array, checked (a uniform output's is shaped as its value)."""
        return check_output_array(what, value, self.shapes[name], self.dtype, None if name in self.uniform else n,
                                  layout)

    def _check_out(self, what: str, name: str, a, n: int, layout: str) -> None:
        if name in self.uniform:
            check_uniform_array(what, a, self.shapes[name], self.dtype)
        else:
            check_array(what, a, self.shapes[name], self.dtype, n, layout)

    def __call__(self, *args, out=None, verify: bool = False, stream=None, out_layout: str | None = None,
                 memory_budget: int | None = None, progress: bool | Callable[[int, int], None] = False,
                 nodes: int | None = None, scatter: str | None = None, **named) -> Outputs:
        """Runs the program. `out=`: arrays to write the outputs into (a mapping by name, a
        sequence in `return` order, or one array for one output). `out_layout=`: the layout
        of the outputs ('aos' or 'soa'; by default the inputs'), new arrays or `out=` arrays
        shaped in it. `memory_budget=`: bytes of device memory a call on host arrays may use
        (default `Program.memory_budget`; on the GPU, half the free memory), the batch then
        running in chunks that fit (`irfuse.runtime.streaming`). `progress=True` draws a bar
        of the chunks done on stderr (rich); a callable is called as `progress(done, total)`
        instead (a call that does not run in chunks reports one step when it is done).
        `verify=True` checks the
        results against the float64 NumPy reference (as `check` does) and raises
        `ExecutionError` if they disagree. GPU arrays are read and written in place and the
        call is ordered on `stream` (see `irfuse.api.device_arrays`); it returns without
        waiting for the GPU. A program over a mesh takes nodal arrays and connectivities
        (`irfuse.api.mesh_calls`; `nodes=`: its number of nodes where no nodal input tells;
        `scatter="atomic"`: its scatters add with atomics, not reproducible)."""
        _check_budget(memory_budget)
        if not verify and progress is False and out_layout is None and nodes is None and scatter is None:
            # A call on GPU arrays made again (`gpu_calls.FastCall`): taken before any other check
            for program in (self, *self._variants.values()) if self._variants else (self,):
                fast = program._fast
                if fast is not None:
                    with program.lock:  # (what `matches` finds, `launch` reads: one call at a time)
                        outputs = fast.launch() if fast.matches(args, named, out, stream) else None
                    if outputs is not None:
                        return outputs
        if self.nodal or self.index_inputs:
            from irfuse.api.mesh_calls import nodes_given, scatter_mode

            return self._call_on_mesh(args, named, out, verify, stream, out_layout, memory_budget, progress,
                                      nodes_given(nodes), scatter_mode(scatter))
        for given, what in ((nodes, "nodes= gives the number of nodes"), (scatter, "scatter= chooses how scatters add")):
            if given is not None:
                raise UsageError(f"{what} of a program over a mesh; this program has no nodal values")
        if out_layout is not None:
            return self._call_out_layout(args, named, out, out_layout, verify, stream, memory_budget, progress)
        if progress is True:
            with progress_bar(f"{self.name}: chunks") as report:
                return self(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget,
                            progress=report, **named)
        _check_progress(progress)
        report = progress or None
        if not verify and report is None and memory_budget is None and stream is None:
            for program in (self, *self._variants.values()) if self._variants else (self,):
                for fast in program._host_fast:  # (a call in place on host arrays made again)
                    if program.memory_budget is None:
                        with program.lock:  # (what `matches` finds, `launch` reads: one call at a time)
                            if fast.matches(args, named, out):
                                return fast.launch()
        arrays, n, layout = self._arrays(args, named)
        strides = self._view_strides(arrays, out, layout, self._chunked(arrays, memory_budget))
        if layout != self.layout or strides != self.strides:
            try:
                target = self._for(layout, strides)
            except CompileError:
                # Host arrays may be copied instead (a program whose loops run from the host
                # takes no strided view); GPU arrays are not copied behind the caller's back.
                if not strides or isinstance(first_array(arrays), DeviceArray):
                    raise
                target = self._for(layout, {})
                target._host_views_copied = True
            return target(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget,
                          progress=progress, **named)
        if arrays and isinstance(first_array(arrays), DeviceArray):
            outputs = self._call_in_place(arrays, n, out, stream, args, named)
            if report is not None:
                report(1, 1)
            if verify:
                report = verify_on_device(self, arrays, outputs, n)
                if not report.ok:
                    raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
            return outputs
        if stream is not None:
            raise UsageError("stream= orders a call on GPU arrays; these inputs are in host memory")
        targets = {}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                targets[name] = self._host_out(f"out= array for '{name}'", name, value, n, self.layout)
            refuse_overlapping_outputs(targets)
        results = [targets.get(name) if name in targets else page_aligned(self._shape(name, n), self.dtype)
                   for name in self.outputs]
        if n:
            with self.lock:
                run = self._run(arrays, n, dict(zip(self.outputs, results)),
                                memory_budget if memory_budget is not None else self.memory_budget, report)
            if run is not None and not verify and report is None:
                self._keep_host_fast(args, named, out, arrays, dict(zip(self.outputs, results)), run, n)
        outputs = Outputs(self.outputs, results)
        if verify:
            report = verify_on_host(self, arrays, outputs, n)
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return outputs

    def _call_on_mesh(self, args: tuple, named: dict, out, verify: bool, stream, out_layout, memory_budget,
                      progress, nodes, scatter: str, layout: str | None = None) -> Outputs:
        """A call of a program over a mesh (`irfuse.api.mesh_calls`; `layout`: its arrays'
        layout where the caller knows it, as a program of passes does)."""
        # (imported here: a program with no mesh never needs them, nor does loading one)
        from irfuse.api.mesh_calls import call_on_mesh, verify_mesh_call
        from irfuse.api.mesh_gpu_calls import MeshGpuFastCall, call_on_mesh_gpu, host_copy, on_gpu

        if out_layout is not None:
            raise UsageError("out_layout= is not taken by a program over a mesh: its calls run on arrays of "
                             "structures")
        if progress is True:
            with progress_bar(f"{self.name}: chunks") as report:
                return self._call_on_mesh(args, named, out, verify, stream, out_layout, memory_budget, report, nodes,
                                          scatter, layout)
        _check_progress(progress)
        if not verify and progress is False and memory_budget is None and self.memory_budget is None \
                and stream is None:
            for fast in self._host_fast:
                if fast.scatter == scatter and fast.nodes == nodes:
                    with self.lock:  # (what `matches` finds, `launch` reads: one call at a time)
                        if fast.matches(args, named, out):
                            return fast.launch()
        if not verify and progress is False and memory_budget is None:
            for fast in self._mesh_fast:
                with self.lock:  # (what `matches` finds, `launch` reads: one call at a time)
                    outputs = fast.launch() if fast.matches(args, named, out, stream, nodes, scatter) else None
                if outputs is not None:
                    return outputs
        bound = bind_inputs(self.inputs, args, named, self)
        if on_gpu(bound):
            if memory_budget is not None:
                raise UsageError("memory_budget= chunks a call on host arrays; a call over a mesh on GPU arrays runs "
                                 "in one piece")
            self._last_mesh_run = None
            outputs, n, m = call_on_mesh_gpu(self, bound, out, nodes, scatter, stream, layout)
            kept, self._last_mesh_run = self._last_mesh_run, None
            if kept is not None and not verify and progress is False and names_every_output(self.outputs, out) and \
                    not any(type(v) is np.ndarray and v.ndim for v in bound.values()):  # (host arrays: values may change)
                fast = MeshGpuFastCall(self, args, named, out, stream, nodes, scatter, kept)
                if fast.usable:
                    self._mesh_fast = [fast, *self._mesh_fast[:1]]
            if callable(progress):
                progress(1, 1)
            if verify:  # on host copies of the arguments and the results
                dev = self.opened_device()
                dev.synchronize()
                verify_mesh_call(self, {k: host_copy(dev, v) for k, v in bound.items()},
                                 Outputs(self.outputs, [host_copy(dev, o) for o in outputs]), n, m)
            return outputs
        if stream is not None:
            raise UsageError("stream= orders a call on GPU arrays; these inputs are in host memory")
        outputs, n, m = call_on_mesh(self, args, named, out, nodes, scatter, memory_budget,
                                     progress if callable(progress) else None, verify, layout)
        return outputs

    def _call_out_layout(self, args: tuple, named: dict, out, out_layout: str, verify: bool, stream,
                         memory_budget: int | None, progress=False) -> Outputs:
        """A call whose outputs are in `out_layout`: each output array (new, or given by
        `out=` in `out_layout`'s shape) is passed to the kernels as a view in the inputs'
        layout, which they write at its strides (`kas.strides`; one variant per batch size,
        the strides of a structure of arrays being multiples of it)."""
        try:
            check_layout(out_layout)
        except ValueError as e:
            raise UsageError(f"out_layout: {e}") from None
        arrays, n, layout = self._arrays(args, named)
        if out_layout == layout:
            return self(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget, progress=progress,
                        **named)
        first = first_array(arrays)
        on_gpu = isinstance(first, DeviceArray)
        given = bind_outputs(self.outputs, out) if out is not None else {}
        targets, views = {}, {}
        for name in self.outputs:
            uniform = name in self.uniform  # no batch axis to move
            shape = self.shapes[name] if uniform else batch_shape(out_layout, self.shapes[name], n)
            what = f"out= array for '{name}'"
            if on_gpu:
                if name in given:
                    a = gpu_out_array(what, given[name])
                    self._check_out(what, name, a, n, out_layout)
                else:
                    a = empty_like_family(first, shape, self.dtype)
                targets[name], views[name] = a.obj, (a if uniform else moved_batch_axis(a, layout))
            else:
                if name in given:
                    a = self._host_out(what, name, given[name], n, out_layout)
                else:
                    a = page_aligned(shape, self.dtype)
                targets[name] = a
                views[name] = a if uniform else np.moveaxis(a, -1, 0) if layout == "aos" else np.moveaxis(a, 0, -1)
        got = self(*args, out=views, stream=stream, memory_budget=memory_budget, progress=progress, **named)
        if verify:
            target = self.for_layout(layout)
            report = (verify_on_device(target, arrays, Outputs(self.outputs, list(views.values())), n) if on_gpu
                      else verify_on_host(target, arrays, Outputs(self.outputs, list(views.values())), n))
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return got if on_gpu else Outputs(self.outputs, [targets[name] for name in self.outputs])

    def _run(self, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray],
             budget: int | None = None, progress: Callable[[int, int], None] | None = None):
        """Runs on host arrays: in chunks on the GPU or within a budget (`progress` told of
        each), else in one piece (`progress` told once, at the end). The in-place run it
        replayed, if it ran in place on the CPU backend."""
        if self.backend == "cuda" or budget is not None:
            self.last_chunks = run_in_chunks(self, arrays, n, results, budget, progress)
            return None
        self.last_chunks = 0  # (not the chunks of an earlier call: the same Program may be shared)
        run = run_on_host(self, arrays, n, results)
        if progress is not None:
            progress(1, 1)
        return run

    def _keep_host_fast(self, args: tuple, named: dict, out, arrays: dict, results: dict, run, n: int) -> None:
        """Keeps a call that ran in place on the CPU backend for the fast path
        (`host_calls.keep_fast_call`)."""
        shapes = None if out is not None else {name: self._shape(name, n) for name in self.outputs}
        keep_fast_call(self, args, named, out, arrays, results, run, shapes)

    def _call_in_place(self, arrays: dict[str, DeviceArray], n: int, out, stream, args: tuple = (),
                       named: dict | None = None) -> Outputs:
        return call_on_gpu(self, arrays, n, out, stream, args, named)

    def opened_device(self):
        """The program's device (the CPU's or the GPU's), opened on first use."""
        if self._device is None:
            self._device = open_device(self.backend, self._with_binary())
            _holding_devices.add(self)
        elif self.backend == "cuda":
            self._device.make_current()  # a call from another thread than the one that opened it
        return self._device

    def _with_binary(self) -> Artifact:
        """The artifact with the binary this program's backend runs (built where the artifact,
        read from the disk cache or a plan, holds none: the host library, a cubin for another
        GPU)."""
        from irfuse.driver.binaries import with_binaries

        arch = None
        if self.backend == "cuda":
            from irfuse.runtime.cuda_device import current_arch

            arch = current_arch()
        return with_binaries(self.artifact, self.backend, arch)

    def recorded(self, key, make):
        """The recorded run kept under `key` (a batch size, or a path and a batch size), made by
        `make()` when there is none; the `BOUND_SIZES` most recently used are kept."""
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = make()
            self._evict()
        else:
            self._bound.move_to_end(key)
        return bound

    def _evict(self) -> None:
        while len(self._bound) > BOUND_SIZES:
            _, bound = self._bound.popitem(last=False)
            if isinstance(bound, (GpuInPlaceRun, ChunkedRun)):
                bound.release()

    def check(self, *args, sample: int | None = 100_000, seed: int = 0, **named) -> Verification:
        """Runs the program and checks its outputs against the float64 NumPy reference, on every
        element up to `sample` of them and on a seeded sample of `sample` beyond (`None`: every
        element), with the rule `irfuse run` uses. A program over a mesh is checked on every
        element and node (`nodes=`: as its call takes it)."""
        if sample is not None:
            check_whole("check: sample (elements checked)", sample, 1)
        check_whole("check: seed", seed, 0)
        if self.nodal or self.index_inputs:
            return self._check_on_mesh(args, named)
        arrays, n, layout = self._arrays(args, named)
        strides = self._view_strides(arrays, None, layout, self._chunked(arrays, None))
        if layout != self.layout or strides != self.strides:
            return self._for(layout, strides).check(*args, sample=sample, seed=seed, **named)
        if arrays and isinstance(first_array(arrays), DeviceArray):
            return verify_on_device(self, arrays, self._call_in_place(arrays, n, None, None), n, sample, seed)
        return verify_on_host(self, arrays, self(**arrays), n, sample, seed)

    def _check_on_mesh(self, args: tuple, named: dict) -> Verification:
        from irfuse.api.mesh_calls import bind_mesh_arguments, mesh_verification, nodes_given
        from irfuse.api.mesh_gpu_calls import host_copy, on_gpu

        nodes = nodes_given(named.pop("nodes", None))
        outputs = self._call_on_mesh(args, named, None, False, None, None, None, False, nodes, "ordered")
        bound = bind_inputs(self.inputs, args, named, self)
        if on_gpu(bound):  # (checked on host copies, as `verify=True` does)
            dev = self.opened_device()
            dev.synchronize()
            bound = {k: host_copy(dev, v) for k, v in bound.items()}
            outputs = Outputs(self.outputs, [host_copy(dev, o) for o in outputs])
        arrays, n, m, _, layout = bind_mesh_arguments(self, (), bound, nodes)
        if layout == "soa":  # (the reference reads arrays of structures)
            outputs = Outputs(self.outputs, [o if name in self.uniform else np.moveaxis(o, -1, 0)
                                             for name, o in zip(self.outputs, outputs)])
        return mesh_verification(self, arrays, outputs, n, m)

    def time(self, *args, repeat: int = 20, warmup: int = 1, out=None, memory_budget: int | None = None,
             nodes: int | None = None, scatter: str | None = None, **named) -> list[float]:
        """Seconds of each of `repeat` runs on these arrays (after `warmup` more): on GPU arrays
        the device time of one call's captured graph from an idle GPU, on NumPy arrays on the
        CPU one replay's wall time, a call in chunks whole; a program over a mesh (which takes
        `nodes=` and `scatter=` as its calls do) one call end to end (`irfuse.api.timing`). Each count
        is a whole number, at most a million."""
        from irfuse.api.timing import time_calls, time_runs

        if self.nodal or self.index_inputs:
            return time_calls(self, args, named, out, repeat, warmup, nodes=nodes, scatter=scatter,
                              memory_budget=memory_budget)
        return time_runs(self, args, named, out, repeat, warmup, memory_budget)

    def leave_thread(self) -> None:
        """Pops the GPU context the calling thread pushed to run this program (pushed again on
        its next call here): for a thread that lives as long as the process and is not the
        main one (a framework's), where it could not be popped before PyCUDA's clean-up at
        exit."""
        with self.lock:
            if self._device is not None and self.backend == "cuda":
                self._device.release_thread()

    def close(self) -> None:
        """Releases the device and the buffers of recorded runs (a later call opens them again)."""
        with self.lock:
            if self._device is not None and self.backend == "cuda":
                # (current in this thread, so that what another thread made is freed here too)
                self._device.make_current()
            self._fast = None
            self._host_fast = []
            self._mesh_fast = []
            let_go_of_any_loops(self)
            for bound in self._bound.values():
                if isinstance(bound, (GpuInPlaceRun, ChunkedRun, MeshInPlaceRun)):
                    bound.release()
            self._bound.clear()
            if self._device is not None:
                self._device.close()
                self._device = None

    def phase_plan(self):
        """This program cut at its reductions over the batch (`irfuse.transforms.batch_phases`):
        the phases a run over the batch in pieces takes; one, the program, when it does not
        reduce. (Cutting is cheap; compiling the phases is `phases`.)"""
        if self._phases is not None:
            return self._phases[0]
        from irfuse.driver.phases import phase_plan

        return phase_plan(self.compiled)

    def phases(self) -> tuple:
        """`phase_plan` and each phase compiled as this program was (the same options, layout
        and strides), kept: the first call compiles them (or loads them from the disk cache)."""
        if self._phases is None:
            plan = self.phase_plan()
            if len(plan.phases) == 1 and all(r.name in self.outputs for r in plan.phases[0].partials):
                programs = [self]  # the program itself gives its one phase's outputs and partials by name
            else:
                from irfuse.driver.phases import phase_texts

                rebuild, spec = self.compiled_from("its phases at its reductions cannot be compiled as it was")
                strides = tuple(sorted(self.strides.items()))
                programs = [rebuild({**spec, "source": ("ir", text), "filename": f"{self.name}, phase {k}"},
                                    self.layout, strides) for k, text in enumerate(phase_texts(plan))]
            self._phases = (plan, programs)
        return self._phases

    def compiled_from(self, refused: str) -> tuple:
        """(function, irfuse.compile's arguments) that compile this program again; UsageError
        saying what is `refused` for a program compiled from a tuning result, which has none."""
        if self._spec is None:
            raise UsageError(f"program {self.name} was compiled from a tuning result, so {refused}: compile it from "
                             "its source")
        return self._spec

    def __reduce__(self):
        """Pickled as what it was compiled from: unpickling compiles it again (once per
        process; the disk cache usually has it), for the same layout and strides."""
        if self._spec is None:
            raise TypeError(f"program {self.name} was compiled from a tuning result and cannot be pickled: compile it "
                            "from its source with the tuning's pipeline")
        rebuild, spec = self._spec
        return (rebuild, (spec, self.layout, tuple(sorted(self.strides.items()))))

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
