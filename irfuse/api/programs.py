"""`Program`: a compiled KAS program called like a function on NumPy arrays.

A call binds its arguments (by position in the program's `input` order, or by name),
checks them (`arguments`), and replays a run recorded once per batch size: the
program's launches with their buffers bound (on the GPU one CUDA graph). The caller's
arrays are copied into the recorded run's input buffers (on the GPU, the upload) and
the outputs out of its output buffers into new arrays or the `out=` arrays given, so
an output may be an array that is also an input. Nothing is allocated per call once a
batch size has been seen (the results excepted, unless `out=` gives them), and nothing
is verified unless asked (`check`, or `verify=True`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from irfuse.api.arguments import bind_inputs, bind_outputs, check_array, check_output_array, host_array
from irfuse.diagnostics import ExecutionError
from irfuse.driver.artifact import CompiledProgram
from irfuse.runtime.executor import Executor, Recorded, open_device
from irfuse.runtime.reference import run_references
from irfuse.runtime.verify import OutputCheck, check_outputs, sample_elements, subset

BOUND_SIZES = 4  # batch sizes whose recorded runs (and their buffers) a program keeps


class Outputs(tuple):
    """A call's outputs in the program's `return` order: `out[0]`, `out["F"]` or `out.F`."""

    def __new__(cls, names: tuple[str, ...], values: list[np.ndarray]):
        self = super().__new__(cls, values)
        self._names = names
        return self

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names.index(key))
            except ValueError:
                raise KeyError(f"no output '{key}' (the outputs: {', '.join(self._names)})") from None
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def keys(self) -> tuple[str, ...]:
        return self._names

    def items(self):
        return zip(self._names, self)

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self._names, self))

    def __repr__(self) -> str:
        return "Outputs(" + ", ".join(f"{k}=<{v.dtype} {v.shape}>" for k, v in self.items()) + ")"


class Verification:
    """What `Program.check` found: one `OutputCheck` per output, on `elements` of `n`."""

    def __init__(self, checks: list[OutputCheck], elements: int, n: int):
        self.checks, self.elements, self.n = checks, elements, n

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        where = "every element" if self.elements == self.n else f"a seeded sample of {self.elements} of {self.n} elements"
        return f"verified on {where}: " + "; ".join(c.describe() for c in self.checks)


class _Bound:
    """A run recorded for one batch size, with its input buffers."""

    def __init__(self, compiled: CompiledProgram, device, arrays: dict[str, np.ndarray], n: int):
        self.inputs = {name: device.upload(a) for name, a in arrays.items()}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs)


class Program:
    """A compiled KAS program. Call it with one array per input, shaped `(N, *value shape)`
    (array of structures, the batch axis first) in the program's element type; it returns
    `Outputs`. `inputs`, `outputs` and `shapes` say what it takes and gives."""

    def __init__(self, compiled: CompiledProgram, backend: str, warnings: list):
        self.compiled = compiled
        self.backend = backend
        self.warnings = list(warnings)
        ref = compiled.reference_program
        self.name = ref.sym_name.data
        self.inputs: tuple[str, ...] = tuple(ref.inputs)
        self.outputs: tuple[str, ...] = tuple(ref.outputs)
        self.shapes: dict[str, tuple[int, ...]] = {
            **{n: tuple(t.shape) for n, t in zip(ref.inputs, ref.input_types())},
            **{n: tuple(t.shape) for n, t in zip(ref.outputs, ref.output_types())}}
        self.dtype = np.dtype(compiled.element.numpy)
        self._device = None
        self._bound: OrderedDict[int, _Bound] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        """The generated CUDA C (GPU kernels and their host versions)."""
        return self.compiled.source

    @property
    def kernels(self) -> list[str]:
        return [k.name for k in self.compiled.kernels]

    def __repr__(self) -> str:
        return (f"<irfuse.Program {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)}), "
                f"{self.dtype.name}, {len(self.compiled.kernels)} kernel(s) on {self.backend}>")

    def _arrays(self, args: tuple, named: dict) -> tuple[dict[str, np.ndarray], int]:
        bound = bind_inputs(self.inputs, args, named)
        arrays, n = {}, None
        for name, value in bound.items():
            what = f"input '{name}'"
            a = host_array(what, value)
            n = check_array(what, a, self.shapes[name], self.dtype, n)
            arrays[name] = a
        return arrays, n or 0

    def __call__(self, *args, out=None, verify: bool = False, **named) -> Outputs:
        """Runs the program. `out=`: arrays to write the outputs into (a mapping by name, a
        sequence in `return` order, or one array for one output). `verify=True` checks the
        results against the float64 NumPy reference (as `check` does) and raises
        `ExecutionError` if they disagree."""
        arrays, n = self._arrays(args, named)
        targets = {}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                targets[name] = check_output_array(f"out= array for '{name}'", value, self.shapes[name],
                                                   self.dtype, n)
        results = [targets.get(name) if name in targets else np.empty((n, *self.shapes[name]), self.dtype)
                   for name in self.outputs]
        if n:
            with self._lock:
                self._run(arrays, n, dict(zip(self.outputs, results)))
        outputs = Outputs(self.outputs, results)
        if verify:
            report = self._verify(arrays, outputs, n)
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return outputs

    def _run(self, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray]) -> None:
        if self._device is None:
            self._device = open_device(self.backend, self.compiled)
        dev = self._device
        bound = self._bound.get(n)
        if bound is None:
            bound = self._bound[n] = _Bound(self.compiled, dev, arrays, n)
            while len(self._bound) > BOUND_SIZES:
                self._bound.popitem(last=False)
        else:
            self._bound.move_to_end(n)
            for name, a in arrays.items():
                dev.write(bound.inputs[name], a)
        bound.recorded.replay()
        dev.synchronize()
        for name, (buf, _) in bound.recorded.results.items():
            dev.read_into(results[name], buf)

    def check(self, *args, sample: int | None = 100_000, seed: int = 0, **named) -> Verification:
        """Runs the program and checks its outputs against the float64 NumPy reference, on every
        element up to `sample` of them and on a seeded sample of `sample` beyond (`None`: every
        element), with the rule `irfuse run` uses."""
        arrays, n = self._arrays(args, named)
        return self._verify(arrays, self(**arrays), n, sample, seed)

    def _verify(self, arrays, outputs: Outputs, n: int, sample: int | None = 100_000, seed: int = 0) -> Verification:
        index = np.arange(n) if sample is None else sample_elements(n, "auto", seed, sample)
        picked = subset(arrays, index)
        refs = run_references(self.compiled.reference_program, picked, self.compiled.dtype, len(index))
        return Verification(check_outputs(subset(outputs.as_dict(), index), refs, self.compiled.dtype), len(index), n)

    def close(self) -> None:
        """Releases the device and the buffers of recorded runs (a later call opens them again)."""
        with self._lock:
            self._bound.clear()
            if self._device is not None:
                self._device.close()
                self._device = None

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
