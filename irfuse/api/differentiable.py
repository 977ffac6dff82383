"""A program with its derivative programs, compiled on first use per element type and device:
what the framework operators (`irfuse.torch`, `irfuse.jax`) are built on.

The operators see arrays in arrays of structures (the batch axis first, as PyTorch and JAX
hold batches): per-element values `(N, *shape)`, nodal values `(M, *shape)`, connectivities
`(N, K)`, uniform values shaped as the value. Three programs serve them, each compiled for the
element type and device of the arrays it is called on:

- "primal": the program itself;
- "jvp": its forward derivative along every differentiable input (`irfuse.jvp`, tangents
  only): the inputs, then one tangent per differentiable input, to the outputs' tangents;
- "vjp": its reverse derivative (`irfuse.vjp`, cotangents only): the inputs, then one
  cotangent per output, to the differentiable inputs' cotangents.

An input is differentiable unless it is a mask or a connectivity. The shapes of every
program's results follow from the arrays' shapes alone (`result_shapes`), so that a framework
can trace a call (PyTorch's fake tensors, JAX's abstract values) without compiling anything.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

import numpy as np

from irfuse.api.gpu_calls import GRAPHS_KEPT, torch_signature
from irfuse.diagnostics import UsageError

DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
# What `irfuse.compile` takes beside the source that the arrays of a call do not decide.
COMPILE_OPTIONS = ("pipeline", "n", "profile", "arch", "registers")
# The derivative programs' names for tangents and cotangents (by position for the operators).
TANGENT_PREFIX, COTANGENT_PREFIX = "irfuse_t_", "irfuse_ct_"


class DifferentiableProgram:
    """`source` (what `irfuse.compile` takes) with its derivative programs; `compile_options`:
    more of `irfuse.compile`'s arguments (`n`, `profile`, `pipeline`, ...), the same for all."""

    def __init__(self, source, *, who: str, filename: str | None = None, **compile_options):
        from irfuse.api import compiled_options
        from irfuse.driver.front import frontend, interface_of
        from irfuse.driver.sources import read_source

        for taken in ("dtype", "backend", "layout", "tuning"):
            if taken in compile_options:
                raise UsageError(f"{who}: {taken}= is decided by the arrays each call gets (arrays of structures, "
                                 "the element type and device of the arrays), not given")
        unknown = sorted(set(compile_options) - set(COMPILE_OPTIONS))
        if unknown:
            verb = "is not an option" if len(unknown) == 1 else "are not options"
            raise UsageError(f"{who}: {', '.join(unknown)} {verb} of irfuse.compile (these are: "
                             f"{', '.join(COMPILE_OPTIONS)})")
        compiled = compiled_options(source, who)
        if compiled:  # a compiled program: its source, with the options the arrays do not decide
            source = compiled.pop("source")
            for taken in ("dtype", "backend", "layout"):
                compiled.pop(taken, None)
            compile_options = {**{k: v for k, v in compiled.items() if v is not None}, **compile_options}
        self.who = who
        self.compile_options = dict(compile_options)
        face = interface_of(frontend(read_source(source, filename, who)).module)
        self.text, self.name = face.text, face.name
        self.inputs, self.outputs, self.shapes = face.inputs, face.outputs, face.shapes
        self.nodal, self.index, self.uniform, self.masks = face.nodal, face.index, face.uniform, face.masks
        self.differentiable: tuple[str, ...] = tuple(n for n in self.inputs if n not in self.index | self.masks)
        # Outputs with a tangent (jvp's results) and those taking a cotangent (vjp's inputs), in
        # return order: read off the derivative programs, which decide them.
        self.tangent_outputs: tuple[str, ...] = ()
        self.cotangent_outputs: tuple[str, ...] = ()
        if self.differentiable:
            jvp = interface_of(self._derived("jvp"))
            self.tangent_outputs = tuple(n.removeprefix(TANGENT_PREFIX) for n in jvp.outputs)
            vjp = interface_of(self._derived("vjp"))
            self.cotangent_outputs = tuple(n.removeprefix(COTANGENT_PREFIX) for n in vjp.inputs[len(self.inputs):])
        self._programs: dict[tuple[str, str, str], object] = {}
        self._lock = threading.Lock()
        # (kind, element type) -> the CUDA graphs of the last GPU calls, by `_memory_key`
        self._graphs: dict[tuple[str, str], OrderedDict] = {}

    def __repr__(self) -> str:
        return f"<irfuse differentiable program {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})>"

    def _derived(self, kind: str):
        """A fresh module of the program of `kind`."""
        from irfuse.api import jvp, vjp
        from irfuse.driver.front import frontend
        from irfuse.driver.sources import Source

        source = Source(self.text, self.name, given_module=True)
        if kind == "primal":
            return frontend(source).module
        if not self.differentiable:
            raise UsageError(f"{self.who}: {self.name} has no differentiable input (masks and connectivities have "
                             "no derivative)")
        if kind == "jvp":
            return jvp(source, wrt=self.differentiable, prefix=TANGENT_PREFIX, with_outputs=False)
        return vjp(source, wrt=self.differentiable, prefix=COTANGENT_PREFIX, with_outputs=False)

    def program(self, kind: str, dtype: str, backend: str):
        """The compiled `Program` of `kind` for element type `dtype` ('f32', 'f64') on `backend`
        ('cpu', 'cuda'), compiled on first use (and from the disk cache in a later process)."""
        key = (kind, dtype, backend)
        with self._lock:
            made = self._programs.get(key)
            if made is None:
                from irfuse.api import compile

                made = self._programs[key] = compile(self._derived(kind), dtype=dtype, backend=backend,
                                                     layout="aos", **self.compile_options)
            return made

    def run_on_gpu(self, kind: str, dtype: str, arrays, out, stream: int) -> None:
        """Runs the program of `kind` on GPU arrays, writing `out`, ordered on `stream`. The
        frameworks call from threads of their own that live as long as the process (XLA's
        execution threads, PyTorch's autograd threads): a CUDA context left pushed there could
        not be popped before PyCUDA's clean-up at exit, which then aborts the process, so a
        call from any thread but the main one pops it when its launches are queued."""
        compiled = self.program(kind, dtype, "cuda")
        try:
            # A framework's tensors are new objects at every call, mostly on memory a call had
            # before (its allocator hands freed blocks out again): such a call launches the
            # CUDA graph captured for that memory, with none of a call's binding and checks
            # (which depend on the memory, shapes, types and layout alone).
            key = _memory_key(arrays, out, stream)
            graphs = self._graphs.setdefault((kind, dtype), OrderedDict())
            with compiled.lock:
                graph = graphs.get(key) if key is not None else None
                if graph is not None:
                    if graph.alive:
                        compiled.opened_device()  # (a framework's thread popped the context after its last call)
                        graph.launch_on(stream)
                        graphs.move_to_end(key)
                        return
                    del graphs[key]  # evicted by the program since
            compiled(*arrays, out=list(out), stream=stream)
            with compiled.lock:
                fast = compiled._fast
                # (kept only where it is this memory's: another thread's call may have come between)
                if fast is not None and key is not None and key == (fast.stream, *fast.signatures):
                    graphs[key] = fast.graph
                    while len(graphs) > GRAPHS_KEPT:
                        graphs.popitem(last=False)
                    # (the program's own fast path would hold these tensors, and their memory,
                    # until its next call; this one holds their addresses alone)
                    compiled._fast = None
        finally:
            if threading.current_thread() is not threading.main_thread():
                compiled.leave_thread()

    # What each program takes and gives, by name, in order.

    def argument_names(self, kind: str) -> tuple[str, ...]:
        if kind == "primal":
            return self.inputs
        if kind == "jvp":
            return self.inputs + self.differentiable
        return self.inputs + self.cotangent_outputs

    def result_names(self, kind: str) -> tuple[str, ...]:
        return {"primal": self.outputs, "jvp": self.tangent_outputs, "vjp": self.differentiable}[kind]

    def _arguments(self, kind: str, count: int) -> tuple[str, ...]:
        """`argument_names(kind)`, a call of `count` arguments refused unless it gives them all."""
        names = self.argument_names(kind)
        if count != len(names):
            raise UsageError(f"{self.who}: {self.name} takes {len(self.inputs)} arrays ({', '.join(self.inputs)}), "
                             f"not {count - len(names) + len(self.inputs)}")
        return names

    def element_type(self, kind: str, dtypes) -> str:
        """'f32' or 'f64': the element type of a call whose arguments have `dtypes` (NumPy
        dtypes or what `np.dtype` reads), connectivities aside; a clear error otherwise."""
        names = self._arguments(kind, len(dtypes))
        found = None
        for position, (name, dtype) in enumerate(zip(names, dtypes)):
            if position < len(self.inputs) and name in self.index:
                if np.dtype(dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
                    raise UsageError(f"{self.who}: '{name}' is a connectivity: int32 or int64 node numbers, not "
                                     f"{np.dtype(dtype)}")
                continue
            element = DTYPES.get(np.dtype(dtype))
            if element is None:
                raise UsageError(f"{self.who}: '{name}' holds {np.dtype(dtype)}; {self.name} takes float32 or "
                                 "float64 arrays")
            if found is not None and element != found[1]:
                raise UsageError(f"{self.who}: '{name}' holds {np.dtype(dtype)} and '{found[0]}' "
                                 f"{'float32' if found[1] == 'f32' else 'float64'}: pass every array in one "
                                 "element type")
            found = found or (name, element)
        return found[1] if found else "f32"

    def result_shapes(self, kind: str, shapes) -> list[tuple]:
        """The shapes of the results of a call of `kind` on arguments shaped `shapes` (in
        `argument_names` order; entries may be symbolic, as a framework's tracer gives them),
        each argument's shape checked against its value's."""
        names = self._arguments(kind, len(shapes))
        n = m = None
        for position, (name, shape) in enumerate(zip(names, shapes)):
            derived = position >= len(self.inputs)  # (a tangent or a cotangent, named as its value)
            role = {"jvp": "tangent of ", "vjp": "cotangent of "}[kind] if derived else ""
            value = self.shapes[name]
            shape = tuple(shape)
            want = value if name in self.uniform else (shape[0] if shape else None, *value)
            if len(shape) != len(want) or any(w is not None and not _same(s, w) for s, w in zip(shape, want)):
                expected = value if name in self.uniform else (("M" if name in self.nodal else "N"), *value)
                raise UsageError(f"{self.who}: the {role}'{name}' must be shaped {_shape_text(expected)} (arrays of "
                                 f"structures{', one value for the batch' if name in self.uniform else ''}); got "
                                 f"{_shape_text(shape)}")
            if name in self.uniform:
                continue
            if name in self.nodal:
                m = shape[0] if m is None else m
            else:
                n = shape[0] if n is None else n
        results = []
        for name in self.result_names(kind):
            value = self.shapes[name]
            if name in self.uniform:
                results.append(value)
            elif name in self.nodal:
                if m is None:
                    raise UsageError(f"{self.who}: output '{name}' holds a value per node and no nodal input tells "
                                     "how many nodes there are: give the program a nodal input")
                results.append((m, *value))
            else:
                results.append((1 if n is None else n, *value))
        return results


def _memory_key(arrays, out, stream: int) -> tuple | None:
    """What a GPU call on PyTorch tensors depends on beyond their values: the stream and each
    tensor's `torch_signature`, as the program's fast path keeps them (None for other arrays:
    JAX's buffers are not kept)."""
    torch = sys.modules.get("torch")
    if torch is None or not all(isinstance(t, torch.Tensor) for t in (*arrays, *out)):
        return None
    return (stream, *(torch_signature(t) for t in (*arrays, *out)))


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a symbolic size whose comparison cannot be decided: not refused here
        return True


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"

