"""irfuse from Python: compile a KAS program once, call it on arrays.

    import numpy as np
    import irfuse

    prog = irfuse.compile("examples/synctest.kas")          # or KAS source text
    F, = prog(np.random.rand(1000, 3, 3).astype(np.float32))
    out = prog(A=a)                                          # by name; out.F, out["F"], out[0]
    prog(a, out=result)                                      # into an existing array
    print(prog.check(a))                                     # against the float64 reference

`compile` runs the frontend, the fusion search and the pass pipeline, and NVRTC or the
host C++ compiler; the compiled program is cached on disk (`irfuse.api.program_cache`:
keyed by everything compiling reads, irfuse's own code and the op library included) and
the `Program` kept in memory, so compiling the same source with the same options again
returns it at once, in this process or the next.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref

from irfuse.api import program_cache
from irfuse.api.program_cache import program_key
from irfuse.api.programs import Outputs, Program, Verification
from irfuse.artifact.stages import StagedArtifact
from irfuse.diagnostics import UsageError
from irfuse.driver.options import bytes_of, chosen_backend, compile_options, dtype_name
from irfuse.driver.sources import Source, is_source_text, read_source

# (The compiler, xDSL included, is imported where a program is compiled: a process that only
# runs programs the disk cache holds never imports it.)

__all__ = ["compile", "program", "PythonProgram", "Program", "StagedProgram", "Outputs", "Verification",
           "IrfuseWarning"]

def __getattr__(name: str):
    # `StagedProgram` imported on first use: its module brings the mesh calls, which loading
    # a program of one stage (a cached one, say) never needs
    if name == "StagedProgram":
        from irfuse.api.staged_programs import StagedProgram

        return StagedProgram
    raise AttributeError(f"module 'irfuse.api' has no attribute '{name}'")


class IrfuseWarning(UserWarning):
    """A compiler warning about the program (an unused input, a statement nobody reads)."""


_programs: dict[tuple, Program] = {}
_programs_lock = threading.RLock()  # (re-entered: a derivative of a compiled program compiles it)


class PythonProgram:
    """A function under `@irfuse.program`: `irfuse.compile(f, ...)` compiles it with the
    options given there; calling it compiles it at the first call with the decorator's options
    (`@irfuse.program(backend="cpu")`) and, unless they fix `dtype`, for the float type of the
    call's first array (float32 or float64; float32 where none has one), once a type, and runs it."""

    def __init__(self, fn, options: dict | None = None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.options = dict(options or {})
        self._programs: dict[str | None, Program] = {}  # by the element type a call's arrays named

    def __call__(self, *args, **kwargs):
        dtype = self.options.get("dtype") or _float_type_of((*args, *kwargs.values()))
        program = self._programs.get(dtype)
        if program is None:
            program = self._programs[dtype] = compile(self, **{**self.options, "dtype": dtype})
        return program(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<irfuse.program {self.__qualname__}>"


def _float_type_of(values) -> str | None:
    """'f32' or 'f64': the float type of the first array of `values` holding float32 or
    float64 (an array of values before a number given as a NumPy scalar), else None."""
    typed = [v for v in values if hasattr(v, "dtype")]
    for v in sorted(typed, key=lambda v: len(getattr(v, "shape", ())) == 0):  # (stable: arrays first)
        try:
            return dtype_name(v.dtype)
        except UsageError:  # (a connectivity's integers, another type: the next)
            continue
    return None


# What `@irfuse.program(...)` takes: `compile`'s options.
_PROGRAM_OPTIONS = ("dtype", "backend", "pipeline", "n", "profile", "arch", "tuning", "layout", "registers",
                    "constants")


def program(fn=None, /, **options):
    """Marks a function as an irfuse program (see `irfuse.frontend.python` for what its body
    may hold); its parameters are annotated with `irfuse.Scalar`, `irfuse.Vector[n]`,
    `irfuse.Matrix[n, m]` or `irfuse.Tensor[...]`. `@irfuse.program(dtype="f64", backend="cpu")`
    gives the options a call of the function compiles it with (`compile`'s)."""
    unknown = [k for k in options if k not in _PROGRAM_OPTIONS]
    if unknown:
        raise UsageError(f"@irfuse.program takes compile's options ({', '.join(_PROGRAM_OPTIONS)}), "
                         f"not {unknown[0]!r}")
    if options.get("dtype") is not None:
        options["dtype"] = dtype_name(options["dtype"])
    if fn is None:  # (`@irfuse.program(...)`: the decorator the options make)
        return lambda f: program(f, **options)
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise UsageError(f"@irfuse.program applies to a function, not to a {type(fn).__qualname__}")
    return PythonProgram(fn, options)


def compile(source, *, dtype: str | None = None, backend: str = "auto",
            pipeline: str | None = None, n: int | None = None, profile: str | None = None,
            arch: str | None = None, filename: str | None = None, tuning: str | os.PathLike | None = None,
            layout: str | None = None, registers: str | os.PathLike | None = None, constants=None) -> Program:
    """Compiles a KAS program to a `Program`.

    source: a path to a `.kas` file, KAS source text (text has a `;` or a newline), a
        function (under `@irfuse.program` or not) written as `irfuse.frontend.python` says,
        or a `builtin.module` holding one `kas.program` (as `irfuse-opt` prints it).
    dtype: 'f32' (the default) or 'f64', the element type of every value; NumPy's and
        PyTorch's names and types of the two are taken too ('float32', `np.float64`,
        `torch.float32`).
    backend: 'cuda' (the GPU, through PyCUDA), 'cpu' (the CPU backend), or 'auto' (the
        GPU when one is usable, else the CPU).
    pipeline: a pass pipeline (`irfuse-opt --list-passes`); the default pipeline's fusion
        search otherwise.
    n, profile: the batch size and device profile the fusion search plans for (by default the
        backend's: 'cpu' on the CPU backend, 'h100' on the GPU; `irfuse calibrate` measures the
        machine's).
    registers: a register table written by `irfuse compile` (`registers.json`): the cost model
        reads ptxas's registers and spills from it instead of estimating them; or 'ptxas'
        (CUDA only): the plan's kernels compiled and the search run again with their figures
        until the plan it picks was priced with its own (a few compiles more, the same plan
        every time).
    arch: the GPU architecture to compile for (default: the GPU present, else sm_90).
    filename: the name diagnostics give source text (default '<source>').
    layout: the layout the kernels are compiled for first: 'aos' (arrays shaped
        `(N, *shape)`, the default) or 'soa' (`(*shape, N)`); with `tuning`, the tuning's. A call on arrays in the other
        layout compiles the program for it then (once), so either works; this choice also
        settles shapes that fit both (a batch of scalars, `(3, 3, 3)`).
    constants: uniform inputs fixed when compiling, {name: array} (NumPy, PyTorch, CuPy or
        lists; shaped as the input or flat): the kernels read their numbers as constants of
        their own (on the GPU from the constant bank, operands of the arithmetic: no loads) and
        a call no longer passes them. For tables every element reads, such as a high-order
        element's 1-D basis; the numbers are part of what the program cache keys on.
    tuning: a tuning result of `irfuse tune` (its JSON file) for this program's file: the plan
        it found fastest, compiled again (refused if the search now selects other kernels);
        its element type and pipeline are the tuning's, so `dtype` and `pipeline` may not
        say otherwise.
    """
    if tuning is not None:
        if constants is not None:
            raise UsageError("tuning= gives the plan of the program as tuned, with its inputs: constants= cannot be "
                             "given with it")
        if not isinstance(tuning, (str, os.PathLike)):
            raise UsageError(f"tuning= takes the path of a tuning result of 'irfuse tune', not {tuning!r}")
        return _compile_tuned(source, os.fspath(tuning), dtype, backend, pipeline, arch, layout)
    options = compile_options(dtype, backend, pipeline, n, profile, arch, layout, registers, constants)
    return _Compilation(read_source(source, filename), options).variant(options.layout, {}, warn=True)


def jvp(source, *, wrt, prefix: str = "d", filename: str | None = None, with_outputs: bool = True):
    """The forward derivative of a program (pass `kas-jvp`): a `builtin.module` holding
    program `<name>_jvp`, which takes the inputs, then a tangent `<prefix><x>` for each input
    x in `wrt`, and returns the outputs, then their tangents `<prefix><y>` (the change of each
    output y for those changes of the inputs). `irfuse.compile` compiles it as any program,
    and `jvp` takes it again (derivatives of derivatives). Given a compiled `Program`, the
    derivative compiled with its options.

    source: what `irfuse.compile` takes (a path, KAS text, a Python function, a module), or a
        compiled program.
    wrt: an input's name or a sequence of names (inputs of a mask or connectivity type have
        no derivative).
    with_outputs: False returns the tangents only (the outputs are then computed only as far
        as the tangents need them)."""
    return _derivative(source, "jvp", wrt, filename, "irfuse.jvp", prefix=prefix, with_outputs=with_outputs)


def vjp(source, *, wrt, prefix: str = "bar_", filename: str | None = None, with_outputs: bool = True,
        loops: str = "auto"):
    """The reverse derivative of a program (pass `kas-vjp`): a `builtin.module` holding program
    `<name>_vjp`, which takes the inputs, then a cotangent `<prefix><y>` for each output y, and
    returns the outputs, then the cotangent `<prefix><x>` of each input x in `wrt` (the
    vector-Jacobian product: entry by entry, the sum over the outputs' entries of their
    cotangents times the outputs' derivatives by that input entry). Takes what `irfuse.jvp`
    takes (`with_outputs=False`: the cotangents only); compiled by `irfuse.compile`,
    composable with `jvp` and itself. loops: how loops are differentiated: `unroll`, `tape`
    (run with a history of their carried values, split into checkpointed segments as often as
    the planner's predicted time says), `auto` (unrolled where the planner's kernels of the
    unrolled derivative keep their values in a thread's registers, taped otherwise:
    `irfuse.planner.loop_forms`)."""
    return _derivative(source, "vjp", wrt, filename, "irfuse.vjp", prefix=prefix, loops=loops,
                       with_outputs=with_outputs)


def grad(source, *, of: str, wrt, prefix: str = "grad_", filename: str | None = None, loops: str = "auto"):
    """The gradient of one uniform scalar output `of` (a sum over the batch: an energy) by the
    inputs `wrt`: a `builtin.module` holding program `<name>_grad`, which takes the inputs and
    returns the outputs, then `<prefix><x>` for each x in `wrt` (pass `kas-vjp{of=...}`).
    `irfuse.jvp(irfuse.grad(...), ...)` is a Hessian-vector product. loops: as `vjp`'s."""
    if not isinstance(of, str):
        raise UsageError(f"irfuse.grad: of takes an output's name, not {of!r}")
    return _derivative(source, "vjp", wrt, filename, "irfuse.grad", of=of, prefix=prefix, loops=loops)


def jacobian(source, *, of: str, wrt, prefix: str = "d", filename: str | None = None):
    """The per-element Jacobian of output `of` by the inputs `wrt` (pass `kas-jacobian`): a
    `builtin.module` holding program `<name>_jacobian`, which takes the inputs and returns the
    outputs, then `<prefix><of>_<prefix><x>` for each x in `wrt`, shaped `(N, *y.shape,
    *x.shape)` on a batch of N (the consistent tangent of a return mapping: `irfuse.jacobian(
    "examples/j2_return.kas", of="sig", wrt="deps")`). Per-element values only (no mesh, no
    loop, no output that reads a reduction over the batch of what changes with x). (Of a
    compiled program over a mesh: `irfuse.api.tangents.jacobian`.)"""
    if not isinstance(of, str):
        raise UsageError(f"irfuse.jacobian: of takes an output's name, not {of!r}")
    return _derivative(source, "jacobian", wrt, filename, "irfuse.jacobian", of=of, prefix=prefix)


def hessian(source, *, of: str, wrt: str, prefix: str = "d", filename: str | None = None):
    """The per-element Hessian of the uniform scalar output `of` (a sum over the batch: an
    energy) by the input `wrt`: program `<name>_grad_jacobian`, returning the outputs, the
    gradient `grad_<x>` and `<prefix>2<of>_<prefix><x>2` shaped `(N, *x.shape, *x.shape)`:
    each element's block of the Hessian (an element's energy depends on its own x only). (Of
    a compiled program over a mesh: `irfuse.api.tangents.hessian`.)"""
    if not isinstance(of, str):
        raise UsageError(f"irfuse.hessian: of takes an output's name, not {of!r}")
    return _derivative(source, "hessian", wrt, filename, "irfuse.hessian", of=of, prefix=prefix)


# A compiled program's derivatives, compiled, by what was asked (mode, wrt, how): made once. A
# Newton solve asks for the same operator at every step (`linear_operator`), and deriving it
# again (the source read, the pass, the module verified) cost 25-35 ms a step on 2 cores.
_DERIVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _derivative(source, mode: str, wrt, filename, who: str, **how):
    """The derivative module of a source (`irfuse.driver.front.derivative`); of a compiled
    program, that module compiled with the program's options (kept with the program)."""
    from irfuse.driver.front import derivative

    options = compiled_options(source, who)
    if not options:
        return derivative(source, mode, wrt, filename, who, **how)
    names = (wrt,) if isinstance(wrt, str) else tuple(wrt) if isinstance(wrt, (list, tuple)) else None
    plain = names is not None and all(isinstance(n, str) for n in names) and filename is None and \
        all(isinstance(v, (str, bool, type(None))) for v in how.values())
    key = (mode, names, tuple(sorted(how.items()))) if plain else None  # (anything else: made, checked, not kept)
    kept = _DERIVED.setdefault(source, {})
    if key is None or key not in kept:
        made = compile(derivative(options.pop("source"), mode, wrt, filename, who, **how), **options)
        if key is None:
            return made
        kept[key] = made
    return kept[key]


def compiled_options(source, who: str) -> dict | None:
    """For a compiled program (`Program`, `StagedProgram`): what it was compiled from
    (`source`) and the options of `irfuse.compile` it was compiled with; None for anything
    else."""
    from irfuse.api.staged_programs import StagedProgram

    if not isinstance(source, (Program, StagedProgram)):
        return None
    if source._spec is None:
        raise UsageError(f"{who}: program {source.name} was compiled from a tuning or a saved plan; give its source "
                         "(a path, KAS source text, a Python function)")
    spec = _with_source(source._spec[1])
    spec.pop("filename", None)
    return spec


def _with_source(spec: dict) -> dict:
    """A spec (`_Compilation.spec`) whose source is a module's text, `("ir", text)`, with that
    text as a `Source` `irfuse.compile` takes; a copy."""
    if isinstance(spec["source"], tuple):
        return {**spec, "source": Source(spec["source"][1], spec.get("filename") or "<module>", given_module=True)}
    return dict(spec)


class _Compilation:
    """One program's source and `compile` options: the `Program` of each layout and set of
    strided views it is called with (`variant`), from the disk cache or compiled and stored
    there, kept in memory by everything that decides what compiling gives."""

    def __init__(self, source: Source, options):
        self.source = source
        self.options = options  # `irfuse.driver.options.CompileOptions`, checked

    def key(self, layout: str, strides: dict) -> str:
        """The disk cache's key of the variant for `layout` and `strides`."""
        f = self.source.function
        return program_key(None, text=self.source.text, name=self.source.name, layout=layout, strides=strides,
                           where=(f.__code__.co_filename, f.__code__.co_firstlineno) if f else None,  # type: ignore
                           **self.options.key_fields())

    def artifact(self, layout: str, strides: dict) -> tuple:
        """(artifact or staged program, warnings) from the disk cache, or compiled (and stored
        there) by the driver."""
        key = self.key(layout, strides)
        hit = program_cache.load(key)
        if hit is not None:
            return hit
        from irfuse.driver.compile import compile_from

        made = compile_from(self.source, self.options, layout, strides)
        program_cache.store(key, *made)
        return made

    def spec(self) -> dict:
        """What the program is compiled from again where it is unpickled (a Dask worker): the
        source itself, not a path the worker may not see."""
        o = self.options
        source = (self.source.function if self.source.function is not None else
                  ("ir", self.source.text) if self.source.given_module else self.source.text)
        return dict(source=source, dtype=o.dtype, backend=o.backend, pipeline=o.pipeline, n=o.n, profile=o.profile,
                    arch=o.arch, filename=None if self.source.function is not None else self.source.name,
                    layout=o.layout, registers=o.registers,
                    constants={name: _numbers(shape, values) for name, shape, values in o.constants} or None)

    def variant(self, layout: str, strides: dict | None = None, warn: bool = False) -> Program:
        """The program for `layout` and `strides`, made on first use and kept (its warnings
        said once, at the caller of `irfuse.compile`, where `warn`)."""
        strides = strides or {}
        key = (self.source.text, self.source.name, self.options, self.options.files_read(), layout,
               tuple(sorted(strides.items())))
        return _kept(key, lambda: self._make(layout, strides, warn))

    def _make(self, layout: str, strides: dict, warn: bool) -> Program:
        artifact, diagnostics = self.artifact(layout, strides)
        if warn:  # the variant for the other layout has the same diagnostics: said once
            for d in diagnostics:
                # at the caller of irfuse.compile: _make, its lambda, _kept, variant, compile
                warnings.warn(d.render(), IrfuseWarning, stacklevel=6)
        if isinstance(artifact, StagedArtifact):
            from irfuse.api.staged_programs import StagedProgram

            program = StagedProgram(artifact, self.options.backend, diagnostics, _stage_spec(self.spec()))
        else:
            program = Program(artifact, self.options.backend, diagnostics, variant=self.variant, strides=strides)
        program._spec = (_program_from_spec, self.spec())
        return program


def _numbers(shape: tuple, values: tuple):
    """A constant's numbers as the float64 array `constants=` was given (a pickled program's spec)."""
    import numpy as np

    return np.array(values, dtype=np.float64).reshape(shape)


def _stage_spec(spec: dict):
    """How stage k of a staged program compiled from `spec` is compiled again: its IR as the
    source, the program's options (what compiles a stage alone again: its phases)."""
    def of(k: int, text: str) -> tuple:
        return (_program_from_spec, {**spec, "source": ("ir", text),
                                     "filename": f"{spec.get('filename') or 'program'}, stage {k}"})
    return of


def _program_from_spec(spec: dict, layout: str, strides: tuple) -> Program:
    """A pickled `Program` again: compiled from what it was compiled from (kept per process)."""
    return compile(**_with_source(spec))._for(layout, dict(strides))


def _kept(key: tuple, make) -> Program:
    """The program compiled before under `key`, or `make()`'s, kept from now on."""
    with _programs_lock:
        program = _programs.get(key)
        if program is None:
            program = _programs[key] = make()
    return program


def _compile_tuned(source, tuning: str, dtype: str | None, backend: str, pipeline: str | None,
                   arch: str | None, layout: str) -> Program:
    if pipeline is not None:
        raise UsageError("tuning= gives the pipeline (the plan it timed): pipeline= cannot be given with it")
    # (the layout is the tuning's: a call in the other one is refused by `Program.for_layout`)
    if not isinstance(source, (str, os.PathLike)) or (isinstance(source, str) and is_source_text(source)):
        raise UsageError("tuning= recompiles the program's file: give its path as the source")
    path = os.path.abspath(os.fspath(source))
    chosen = chosen_backend(backend)
    from irfuse.driver.tuned import compile_tuned

    # (kept by the tuning's contents too: a tuning written again at the same path is its new plan)
    program = _kept(("tuning", os.path.abspath(tuning), bytes_of(tuning), path, read_source(path).text, chosen,
                     arch), lambda: Program(compile_tuned(tuning, path, arch, compile_gpu=chosen == "cuda"), chosen, []))
    if dtype is not None and dtype_name(dtype) != program.compiled.dtype:
        raise UsageError(f"{tuning}: the tuning was made for dtype '{program.compiled.dtype}', not {dtype!r}")
    if layout is not None and layout != program.layout:
        raise UsageError(f"{tuning}: the tuning was made for layout '{program.layout}', not '{layout}'")
    return program
