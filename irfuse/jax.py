"""irfuse programs as JAX functions: `irfuse.jax.op(program)`.

    energy = irfuse.jax.op("examples/neo_hookean.kas")
    P, S, W = jax.jit(energy)(F, mu, lam)               # CPU or GPU arrays, float32 or float64
    dF = jax.grad(lambda F: energy(F, mu, lam)[2].sum())(F)
    _, tangents = jax.jvp(energy, (F, mu, lam), (dF, 0.0, 0.0))

Each program runs inside XLA's execution through `jax.experimental.buffer_callback`: the
callback gets XLA's own buffers (the outputs written in place) and, on the GPU, XLA's stream,
on which irfuse's kernels are launched: no copy and no host synchronization; on the CPU the
buffers are passed to the CPU backend as NumPy arrays. The function is a `jax.custom_jvp`:
its tangents come from the program's forward derivative (`irfuse.jvp` along every
differentiable input, tangents only), called through `jax.custom_derivatives.linear_call`
with the program's reverse derivative (`irfuse.vjp`, cotangents only) as its transpose, so
`jax.jvp`, `jax.grad`, `jax.vjp` and `jax.linearize` all run irfuse's fused derivative
programs (masks and connectivities get zero tangents and no cotangent). A call traces and
lowers without compiling anything of irfuse: the results' shapes follow from the arguments'
(`DifferentiableProgram.result_shapes`); each element type and device compiles its programs
when first run.

Arrays are arrays of structures (the batch axis first), as `irfuse.torch` takes them.
Second derivatives through JAX (`jax.hessian`, a `jax.grad` of a `jax.grad`) are refused by
JAX (a callback has no derivative of its own): compose `irfuse.jvp` and `irfuse.grad`
instead. `jax.vmap` of the function over an extra axis runs the program once per entry of that
axis (`vmap_method="sequential"`); `jax.vmap` of its derivatives is refused by JAX
(`linear_call` has no batching rule): the program is batched over its elements already.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.custom_derivatives import linear_call
from jax.experimental.buffer_callback import buffer_callback

from irfuse.api.arguments import bind_inputs, host_scalar
from irfuse.api.differentiable import DifferentiableProgram
from irfuse.diagnostics import UsageError
from irfuse.mesh.order import check_connectivity


class Function:
    """A program as a JAX function: call it with arrays (positionally, in the program's input
    order, or by name, as a program's call takes them) for its outputs (one array, or a tuple
    in return order)."""

    def __init__(self, program: DifferentiableProgram):
        self.program = program
        self._call = jax.custom_jvp(lambda *args: _run(program, "primal", args))
        self._call.defjvp(self._jvp, symbolic_zeros=True)

    def __repr__(self) -> str:
        return f"<irfuse.jax.Function {self.program.name}({', '.join(self.program.inputs)})>"

    def __call__(self, *args, **named):
        inputs = self.program.inputs
        if named:  # (inputs by name too, as a program's call takes them)
            args = tuple(bind_inputs(inputs, args, named).values())
        if len(args) != len(inputs):
            raise UsageError(f"irfuse.jax.op: {self.program.name} takes {len(inputs)} arrays ({', '.join(inputs)}), "
                             f"not {len(args)}")
        for name, a in zip(inputs, args):  # (arrays and tracers have a shape and a type; numbers are JAX's too)
            if not (hasattr(a, "shape") and hasattr(a, "dtype")) and \
                    (isinstance(a, bool) or not isinstance(a, (int, float, np.number))):
                raise UsageError(f"irfuse.jax.op: {self.program.name}'s input '{name}' is a {type(a).__name__}; it "
                                 "takes an array" + (" or a number" if name in self.program.uniform else ""))
            if type(a).__module__.split(".")[0] == "torch":  # (JAX takes no tensor: its TypeError from inside)
                raise UsageError(f"irfuse.jax.op: {self.program.name}'s input '{name}' is a PyTorch tensor; a JAX "
                                 "function takes JAX or NumPy arrays (jax.dlpack.from_dlpack(t) shares a tensor's "
                                 "memory; irfuse.torch.op makes the program a PyTorch operator)")
            if isinstance(a, int) and not isinstance(a, bool) and not -2**63 <= a < 2**63:
                raise UsageError(f"irfuse.jax.op: {self.program.name}'s input '{name}' is {a}, beyond the 64-bit "
                                 "numbers JAX holds")
        _check_connectivities_now(self.program, args)
        made = self._call(*_weak_numbers_typed(self.program, args))
        return made[0] if len(made) == 1 else made

    def _jvp(self, primals, tangents):
        from jax.custom_derivatives import SymbolicZero

        p = self.program
        outputs = self._call(*primals)
        given = {name: t for name, t in zip(p.inputs, tangents)
                 if name in p.differentiable and not isinstance(t, SymbolicZero)}
        if not given:
            return outputs, tuple(jax.numpy.zeros_like(o) for o in outputs)
        # Only the tangents JAX tracks are the linear arguments (a transpose gives cotangents
        # for those alone); the zero tangents of the others travel with the primals.
        dtype = outputs[0].dtype
        moving = tuple(name for name in p.differentiable if name in given)
        still = tuple(jax.numpy.zeros(np.shape(a), dtype) for name, a in zip(p.inputs, primals)
                      if name in p.differentiable and name not in given)
        linear = tuple(jax.numpy.asarray(given[name], dtype=dtype) for name in moving)
        made = dict(zip(p.tangent_outputs, linear_call(_tangents(p, moving), _cotangents(p, moving),
                                                       (tuple(primals), still), linear)))
        return outputs, tuple(made[name] if name in made else jax.numpy.zeros_like(o)
                              for name, o in zip(p.outputs, outputs))


def op(source, *, filename: str | None = None, **compile_options) -> Function:
    """The program `source` (what `irfuse.compile` takes: a path, KAS text, a Python function,
    a module) as a JAX function with forward and reverse derivatives (see the module's
    docstring). `compile_options`: more of `irfuse.compile`'s arguments (`n`, `profile`,
    `pipeline`), not `dtype`, `backend` or `layout`, which each call's arrays decide."""
    return Function(DifferentiableProgram(source, who="irfuse.jax.op", filename=filename, **compile_options))


def _check_connectivities_now(program: DifferentiableProgram, args: tuple) -> None:
    """A connectivity given as a NumPy array, or a JAX array on the CPU outside a trace, checked
    before the call (its words read in place): a node outside the mesh found inside the callback reaches the
    caller as JAX's `JaxRuntimeError`, its message irfuse's error after a traceback. Under
    `jax.jit`, or on the GPU (where reading it would copy it to the host), the callback's
    check is the one that finds it (docs/frameworks.md)."""
    nodal = [a for name, a in zip(program.inputs, args) if name in program.nodal and np.ndim(a) >= 1]
    for name, a in zip(program.inputs, args):
        if name not in program.index or not nodal:
            continue
        on_the_host = isinstance(a, np.ndarray) or (isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer)
                                                    and all(d.platform == "cpu" for d in a.devices()))
        if on_the_host:
            check_connectivity(np.asarray(a), np.shape(nodal[0])[0], what=f"input '{name}'")


def _weak(a) -> bool:
    """Whether `a` is a Python number or a weakly typed JAX value (one made from a Python
    number: under `jax_enable_x64` a float64 that takes the type of what it meets)."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return True
    return bool(getattr(getattr(a, "aval", a), "weak_type", False))


def _weak_numbers_typed(program: DifferentiableProgram, args: tuple) -> tuple:
    """`args` with each Python number and weakly typed value given the floating type of the
    arrays beside it, as JAX's own arithmetic types them (`F32 * 1.3` is float32 with x64 on):
    a float32 call with a Python number for a uniform scalar was refused as mixing types."""
    typed = {np.dtype(a.dtype) for name, a in zip(program.inputs, args) if name not in program.index
             and not _weak(a) and np.dtype(a.dtype).kind == "f"}
    if len(typed) != 1:
        return args  # (none, or several: the element type's own check says what is wrong)
    dtype = typed.pop()
    made = []
    for name, a in zip(program.inputs, args):
        if name in program.index or not _weak(a):
            made.append(a)
            continue
        if isinstance(a, (int, float)):  # (refused by name where beyond the type's range)
            a = host_scalar(f"irfuse.jax.op: {program.name}'s input '{name}'", a, dtype)
        made.append(jax.numpy.asarray(a, dtype=dtype))
    return tuple(made)


def _tangents(program: DifferentiableProgram, moving: tuple[str, ...]):
    """The forward derivative as a linear function of the tangents of the inputs `moving`."""
    def tangents(residuals, linear):
        primals, still = residuals
        given, zeros = dict(zip(moving, linear)), iter(still)
        every = [given[name] if name in given else next(zeros) for name in program.differentiable]
        return _run(program, "jvp", (*primals, *every))
    return tangents


def _cotangents(program: DifferentiableProgram, moving: tuple[str, ...]):
    """The reverse derivative: `_tangents`' transpose (cotangents of the inputs `moving`)."""
    def cotangents(residuals, outgoing):
        primals, _ = residuals
        given = dict(zip(program.tangent_outputs, outgoing))
        shapes = program.result_shapes("primal", [np.shape(a) for a in primals])
        like = dict(zip(program.outputs, shapes))
        dtype = jax.numpy.result_type(*[a for name, a in zip(program.inputs, primals) if name not in program.index])
        cts = tuple(_dense(given.get(name), like[name], dtype) for name in program.cotangent_outputs)
        got = dict(zip(program.differentiable, _run(program, "vjp", (*primals, *cts))))
        return tuple(got[name] for name in moving)
    return cotangents


def _dense(value, shape, dtype):
    """A cotangent as an array (JAX passes an output nobody reads as a symbolic zero)."""
    from jax.interpreters import ad

    if value is None or isinstance(value, ad.Zero):
        return jax.numpy.zeros(shape, dtype)
    return jax.numpy.asarray(value, dtype=dtype)


def _run(program: DifferentiableProgram, kind: str, args) -> tuple:
    """The program of `kind` on `args` as a `buffer_callback` (traced: no compile here)."""
    args = tuple(jax.numpy.asarray(a) for a in args)
    dtypes = [a.dtype for a in args]
    element = program.element_type(kind, dtypes)
    shapes = program.result_shapes(kind, [a.shape for a in args])
    dtype = np.float32 if element == "f32" else np.float64
    results = tuple(jax.ShapeDtypeStruct(shape, dtype) for shape in shapes)

    def run(ctx, outputs, *buffers):
        try:
            stream = ctx.stream  # XLA's stream on the GPU; on the CPU, asking raises
        except Exception:
            stream = None
        if stream is not None:
            program.run_on_gpu(kind, element, buffers, outputs, int(stream))
        else:
            compiled = program.program(kind, element, "cpu")
            compiled(*[np.asarray(b) for b in buffers], out=[np.asarray(o) for o in outputs])

    return tuple(buffer_callback(run, results, vmap_method="sequential")(*args))


__all__ = ["op", "Function"]
