"""irfuse programs as PyTorch operators: `irfuse.torch.op(program)`.

    energy = irfuse.torch.op("examples/neo_hookean.kas")
    P, S, W = energy(F, mu, lam)          # CPU or CUDA tensors, float32 or float64 (numbers for mu, lam too)
    W.sum().backward()                    # F.grad, mu.grad, lam.grad from the reverse program

The program is registered as a custom operator (`torch.library.custom_op`, named
`irfuse::<program name>`, with `_1`, `_2`, ... where that name is taken by another program) with

- a kernel that runs the program on the tensors' device: the CPU backend on CPU tensors (no
  copy: the tensors' memory is passed as NumPy arrays), the CUDA backend on CUDA tensors, in
  place and ordered on PyTorch's current stream (no host synchronization); a call on memory a
  call had before launches the CUDA graph captured for it (`DifferentiableProgram.run_on_gpu`);
- a fake-tensor rule, the results' shapes from the arguments' alone, so `torch.compile`
  traces through it without a graph break and compiles nothing of irfuse while tracing;
- an autograd formula: the backward pass calls a second operator, `irfuse::<name>_vjp`, the
  program's reverse derivative (`irfuse.vjp`, cotangents only) along every differentiable
  input (masks and connectivities get no gradient), fused and compiled like any program.

Arrays are arrays of structures (the batch axis first): per-element values `(N, *shape)`,
nodal values `(M, *shape)`, connectivities `(N, K)` of int32 or int64, uniform values shaped
as the value. Each element type and device compiles its programs on first use (and takes them
from the disk cache in later processes). The backward operator has no derivative of its own:
differentiating a gradient again (`create_graph=True`) is refused by PyTorch; compose
`irfuse.jvp` and `irfuse.grad` for second derivatives. PyTorch 2.13 refuses `torch.func`'s
transforms for such an operator: `torch.autograd` and `torch.compile` are the ways in.
"""

from __future__ import annotations

import re
import struct
import threading

import numpy as np
import torch

from irfuse.api.arguments import bind_inputs
from irfuse.api.differentiable import DifferentiableProgram
from irfuse.diagnostics import UsageError

# qualified name -> (what decides the program, the `Operator`) for this process
_REGISTERED: dict[str, tuple[tuple, "Operator"]] = {}
_LOCK = threading.Lock()


class Operator:
    """A program registered as PyTorch operators; call it with tensors (positionally, in the
    program's input order, or by name, as a program's call takes them) for its outputs (one
    tensor, or a tuple in return order)."""

    def __init__(self, program: DifferentiableProgram, name: str):
        self.program = program
        self.name = f"irfuse::{name}"
        self.forward = _define(self.name, program, "primal")
        self.backward = None
        if program.differentiable:
            self.backward = _define(f"{self.name}_vjp", program, "vjp")
            self.forward.register_autograd(self._backward, setup_context=self._save_inputs)

    def __repr__(self) -> str:
        return f"<irfuse.torch.Operator {self.name}({', '.join(self.program.inputs)})>"

    def __call__(self, *tensors, **named):
        inputs = self.program.inputs
        if named:  # (inputs by name too, as a program's call takes them)
            tensors = tuple(bind_inputs(inputs, tensors, named).values())
        if len(tensors) != len(inputs):
            raise UsageError(f"{self.name} takes {len(inputs)} tensors ({', '.join(inputs)}), not {len(tensors)}")
        if not all(type(t) is torch.Tensor or isinstance(t, torch.Tensor) for t in tensors):
            tensors = self._as_tensors(tensors)
        return self.forward(*tensors)

    def _as_tensors(self, given: tuple) -> tuple:
        """`given` with each uniform scalar given as a number (a Python number, a NumPy scalar
        or 0-d array) made a 0-d tensor of the first tensor's type on its device, as the
        program's calls take numbers; anything else that is not a tensor refused by name."""
        like = next((t for t in given if isinstance(t, torch.Tensor)), None)
        if like is None:
            raise UsageError(f"{self.name} takes tensors (numbers for its uniform scalars), at least one a tensor")
        # (a tensor of another type is refused by the call itself, naming it)
        dtype = like.dtype if like.dtype in (torch.float32, torch.float64) else torch.float32
        out = []
        for name, t in zip(self.program.inputs, given):
            if not isinstance(t, torch.Tensor):
                scalar = name in self.program.uniform and self.program.shapes[name] == ()
                t = _scalar_tensor(f"{self.name}: input '{name}'", t, scalar, dtype, like.device)
            out.append(t)
        return tuple(out)

    def _save_inputs(self, ctx, inputs, output) -> None:
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*inputs)
        masks = self.program.masks
        ctx.mark_non_differentiable(*[o for name, o in zip(self.program.outputs, outputs) if name in masks])
        ctx.output_shapes = [tuple(o.shape) for o in outputs]
        ctx.dtype, ctx.device = outputs[0].dtype, outputs[0].device

    def _backward(self, ctx, *grads):
        p = self.program
        inputs = ctx.saved_tensors
        given = dict(zip(p.outputs, grads))
        like = dict(zip(p.outputs, ctx.output_shapes))
        cotangents = [given[name] if given[name] is not None else
                      torch.zeros(like[name], dtype=ctx.dtype, device=ctx.device) for name in p.cotangent_outputs]
        got = self.backward(*inputs, *cotangents)
        got = dict(zip(p.differentiable, got if isinstance(got, tuple) else (got,)))
        return tuple(got.get(name) for name in p.inputs)


def _scalar_tensor(what: str, value, scalar: bool, dtype, device):
    """A number for a uniform scalar (`scalar`) as a 0-d tensor of `dtype` on `device`, in
    Python alone (a call traced by `torch.compile` takes numbers as constants); refused by
    name where it is a bool, not a real number, beyond the type's range, or not a scalar's."""
    if scalar and isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and \
            value.dtype.kind in "iuf":
        value = value.item()
    if not scalar or isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{what} is a {type(value).__name__}; it takes a tensor" +
                         (" or a number (a uniform scalar)" if scalar else ""))
    try:
        number = float(value)
        if dtype == torch.float32:
            struct.pack("<f", number)  # (OverflowError where it rounds beyond float32's range)
    except OverflowError:
        raise UsageError(f"{what} is {value!r}, beyond the {str(dtype).removeprefix('torch.')} range") from None
    return torch.full((), number, dtype=dtype, device=device)  # (a fill in the stream: no copy from the host)


def op(source, *, name: str | None = None, filename: str | None = None, **compile_options) -> Operator:
    """The program `source` (what `irfuse.compile` takes: a path, KAS text, a Python function,
    a module) as a PyTorch operator with a fake-tensor rule and an autograd formula (see the
    module's docstring). `name`: the operator's name in the `irfuse` namespace (default: the
    program's); `compile_options`: more of `irfuse.compile`'s arguments (`n`, `profile`,
    `pipeline`), not `dtype`, `backend` or `layout`, which each call's tensors decide. The same
    program with the same options gives the same operator again."""
    program = DifferentiableProgram(source, who="irfuse.torch.op", filename=filename, **compile_options)
    base = name if name is not None else program.name
    if not isinstance(base, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
        raise UsageError(f"irfuse.torch.op: name must be an identifier (letters, digits, underscores), not {base!r}")
    decided = (program.text, tuple(sorted((k, repr(v)) for k, v in compile_options.items())))
    with _LOCK:
        for suffix in range(len(_REGISTERED) + 1):
            qualified = base if suffix == 0 else f"{base}_{suffix}"
            known = _REGISTERED.get(qualified)
            if known is None:
                made = Operator(program, qualified)
                _REGISTERED[qualified] = (decided, made)
                return made
            if known[0] == decided:
                return known[1]
    raise AssertionError("unreachable: a free name is found within as many tries as names taken")


def _define(qualified: str, program: DifferentiableProgram, kind: str):
    """The custom operator running the program of `kind` (its kernel and fake-tensor rule)."""
    arguments = program.argument_names(kind)
    results = program.result_names(kind)
    # (arguments named as the program names them: PyTorch's own messages then name them too)
    names = [a + "_" if a in ("self", "out") else a for a in program.inputs]  # (words the schema reserves)
    names += [f"{'t' if kind == 'jvp' else 'ct'}_{a}" for a in arguments[len(program.inputs):]]
    schema = "(" + ", ".join(f"Tensor {a}" for a in names) + ") -> " + (
        "Tensor" if len(results) == 1 else "(" + ", ".join("Tensor" for _ in results) + ")")

    def kernel(*tensors):
        return _run(program, kind, tensors)

    def fake(*tensors):
        dtype = _element_dtype(program, kind, tensors)
        shapes = program.result_shapes(kind, [t.shape for t in tensors])
        made = tuple(tensors[0].new_empty(shape, dtype=dtype) for shape in shapes)
        return made[0] if len(made) == 1 else made

    defined = torch.library.custom_op(qualified, kernel, mutates_args=(), schema=schema)
    defined.register_fake(fake)
    return defined


_NUMPY_OF = {torch.float32: np.float32, torch.float64: np.float64, torch.int32: np.int32, torch.int64: np.int64}


def _numpy_dtype(who: str, name: str, t) -> np.dtype:
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{who}: '{name}' is a {type(t).__qualname__}; the operator takes tensors")
    dtype = _NUMPY_OF.get(t.dtype)
    if dtype is None:
        raise UsageError(f"{who}: '{name}' holds {t.dtype}; the operator takes float32 or float64 tensors "
                         "(connectivities: int32 or int64)")
    return np.dtype(dtype)


def _element_dtype(program: DifferentiableProgram, kind: str, tensors) -> torch.dtype:
    names = program.argument_names(kind)
    dtypes = [_numpy_dtype(program.who, name, t) for name, t in zip(names, tensors)]
    element = program.element_type(kind, dtypes)
    return torch.float32 if element == "f32" else torch.float64


def _run(program: DifferentiableProgram, kind: str, tensors):
    """Runs the program of `kind` on `tensors` (one device) for its results as tensors."""
    element = "f32" if _element_dtype(program, kind, tensors) == torch.float32 else "f64"
    shapes = program.result_shapes(kind, [t.shape for t in tensors])  # (each shape checked, by name)
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise UsageError(f"{program.who}: the tensors are on {', '.join(sorted(map(str, devices)))}: pass every "
                         "tensor on one device")
    device = next(iter(devices))
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"{program.who}: tensors on {device} are not taken (CPU and CUDA tensors are)")
    if device.type == "cuda":
        # Outputs allocated here, on the caller's current stream (PyTorch's allocator reuses
        # memory by stream), the program queued on that stream.
        dtype = torch.float32 if element == "f32" else torch.float64
        made = tuple(torch.empty(shape, dtype=dtype, device=device) for shape in shapes)
        stream = torch.cuda.current_stream(device).cuda_stream
        program.run_on_gpu(kind, element, [t.detach() for t in tensors], made, stream)
    else:
        got = program.program(kind, element, "cpu")(*[t.detach().numpy() for t in tensors])
        made = tuple(torch.from_numpy(np.asarray(a)) for a in got)
    return made[0] if len(made) == 1 else made
