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

import inspect
import os
import sys
from dataclasses import asdict, dataclass
import threading
import warnings

from irfuse.api import program_cache
from irfuse.api.program_cache import program_key
from irfuse.api.programs import Outputs, Program, Verification
from irfuse.artifact.arrays import LAYOUTS
from irfuse.backend.nvrtc import default_arch
from irfuse.diagnostics import UsageError
from irfuse.frontend.source_files import read_source
from irfuse.planner.profiles import DEFAULT_BATCH, backend_profile, load_profile
from irfuse.runtime.cuda_device import gpu_available

# (The compiler, xDSL included, is imported where a program is compiled: a process that only
# runs programs the disk cache holds never imports it.)

__all__ = ["compile", "program", "PythonProgram", "Program", "Outputs", "Verification", "IrfuseWarning"]

BACKENDS = ("auto", "cuda", "cpu")


class IrfuseWarning(UserWarning):
    """A compiler warning about the program (an unused input, a statement nobody reads)."""


_programs: dict[tuple, Program] = {}
_programs_lock = threading.RLock()  # (re-entered: a program over a mesh compiles its passes)


def _is_source_text(source: str) -> bool:
    return "\n" in source or ";" in source


class PythonProgram:
    """A function under `@irfuse.program`: `irfuse.compile(f, ...)` compiles it with options;
    calling it compiles it with the defaults (once) and runs it."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._program: Program | None = None

    def __call__(self, *args, **kwargs):
        if self._program is None:  # compiled once, at the first call (with the defaults)
            self._program = compile(self)
        return self._program(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<irfuse.program {self.__qualname__}>"


def program(fn) -> PythonProgram:
    """Marks a function as an irfuse program (see `irfuse.frontend.python` for what its body
    may hold); its parameters are annotated with `irfuse.Scalar`, `irfuse.Vector[n]`,
    `irfuse.Matrix[n, m]` or `irfuse.Tensor[...]`."""
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise UsageError(f"@irfuse.program applies to a function, not to a {type(fn).__qualname__}")
    return PythonProgram(fn)


def compile(source, *, dtype: str | None = None, backend: str = "auto",
            pipeline: str | None = None, n: int | None = None, profile: str | None = None,
            arch: str | None = None, filename: str | None = None, tuning: str | os.PathLike | None = None,
            layout: str | None = None, registers: str | os.PathLike | None = None) -> Program:
    """Compiles a KAS program to a `Program`.

    source: a path to a `.kas` file, KAS source text (text has a `;` or a newline), a
        function (under `@irfuse.program` or not) written as `irfuse.frontend.python` says,
        or a `builtin.module` holding one `kas.program` (as `irfuse-opt` prints it).
    dtype: 'f32' (the default) or 'f64', the element type of every value.
    backend: 'cuda' (the GPU, through PyCUDA), 'cpu' (the CPU backend), or 'auto' (the
        GPU when one is usable, else the CPU).
    pipeline: a pass pipeline (`irfuse-opt --list-passes`); the default pipeline's fusion
        search otherwise.
    n, profile: the batch size and device profile the fusion search plans for (by default the
        backend's: 'cpu' on the CPU backend, 'h100' on the GPU; `irfuse calibrate` measures the
        machine's).
    registers: a register table written by `irfuse compile` (`registers.json`): the cost model
        reads ptxas's counts from it instead of estimating them.
    arch: the GPU architecture to compile for (default: the GPU present, else sm_90).
    filename: the name diagnostics give source text (default '<source>').
    layout: the layout the kernels are compiled for first: 'aos' (arrays shaped
        `(N, *shape)`, the default) or 'soa' (`(*shape, N)`); with `tuning`, the tuning's. A call on arrays in the other
        layout compiles the program for it then (once), so either works; this choice also
        settles shapes that fit both (a batch of scalars, `(3, 3, 3)`).
    tuning: a tuning result of `irfuse tune` (its JSON file) for this program's file: the plan
        it found fastest, compiled again (refused if the search now selects other kernels);
        its element type and pipeline are the tuning's, so `dtype` and `pipeline` may not
        say otherwise.
    """
    if tuning is not None:
        return _compile_tuned(source, os.fspath(tuning), dtype, backend, pipeline, arch, layout)
    dtype, layout = dtype or "f32", layout or "aos"
    chosen = _chosen_backend(backend)
    if dtype not in ("f32", "f64"):
        raise UsageError(f"dtype '{dtype}' is not one of f32, f64")
    if layout not in LAYOUTS:
        raise UsageError(f"layout '{layout}' is not one of {', '.join(LAYOUTS)}")
    compilation = _Compilation(*_source_of(source, filename), dtype=dtype, backend=chosen, pipeline=pipeline,
                               n=n, profile=profile or backend_profile(chosen), arch=arch, first_layout=layout,
                               registers=os.fspath(registers) if registers is not None else None)
    return compilation.variant(layout, {}, warn=True)


def jvp(source, *, wrt, prefix: str = "d", filename: str | None = None, with_outputs: bool = True):
    """The forward derivative of a program (pass `kas-jvp`): a `builtin.module` holding
    program `<name>_jvp`, which takes the inputs, then a tangent `<prefix><x>` for each input
    x in `wrt`, and returns the outputs, then their tangents `<prefix><y>` (the change of each
    output y for those changes of the inputs). `irfuse.compile` compiles it as any program,
    and `jvp` takes it again (derivatives of derivatives).

    source: what `irfuse.compile` takes (a path, KAS text, a Python function, a module).
    wrt: an input's name or a sequence of names (inputs of a mask or connectivity type have
        no derivative).
    with_outputs: False returns the tangents only (the outputs are then computed only as far
        as the tangents need them)."""
    from irfuse.transforms.forward_mode import forward_derivative

    return _derivative_module(source, wrt, filename, "irfuse.jvp",
                              lambda program, names, lib: forward_derivative(program, names, lib, prefix),
                              with_outputs)


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
    from irfuse.planner.loop_forms import LOOP_JUDGE
    from irfuse.transforms.reverse_mode import reverse_derivative

    return _derivative_module(source, wrt, filename, "irfuse.vjp",
                              lambda program, names, lib: reverse_derivative(program, names, lib, None, prefix,
                                                                             who="irfuse.vjp", loops=loops,
                                                                             judge=LOOP_JUDGE),
                              with_outputs)


def grad(source, *, of: str, wrt, prefix: str = "grad_", filename: str | None = None, loops: str = "auto"):
    """The gradient of one uniform scalar output `of` (a sum over the batch: an energy) by the
    inputs `wrt`: a `builtin.module` holding program `<name>_grad`, which takes the inputs and
    returns the outputs, then `<prefix><x>` for each x in `wrt` (pass `kas-vjp{of=...}`).
    `irfuse.jvp(irfuse.grad(...), ...)` is a Hessian-vector product. loops: as `vjp`'s."""
    if not isinstance(of, str):
        raise UsageError(f"irfuse.grad: of takes an output's name, not {of!r}")
    from irfuse.planner.loop_forms import LOOP_JUDGE
    from irfuse.transforms.reverse_mode import reverse_derivative

    return _derivative_module(source, wrt, filename, "irfuse.grad",
                              lambda program, names, lib: reverse_derivative(program, names, lib, of, prefix,
                                                                             who="irfuse.grad", loops=loops,
                                                                             judge=LOOP_JUDGE))


def _derivative_module(source, wrt, filename, who: str, derive, with_outputs: bool = True):
    """A fresh module of what `irfuse.compile` takes, its program replaced by
    `derive(program, wrt names, library)` (without the original program's outputs unless
    `with_outputs`)."""
    from xdsl.rewriter import Rewriter

    from irfuse.dialects.kas import program_of
    from irfuse.library.catalogue import default_library
    from irfuse.transforms.dead_code import drop_outputs

    names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    if not all(isinstance(n, str) for n in names):
        raise UsageError(f"{who}: wrt takes input names, not {wrt!r}")
    options = _compile_options(source, who)
    module = _kas_module(options.pop("source") if options else source, filename, who)
    program = program_of(module)
    derived = derive(program, names, default_library())
    if not with_outputs:
        drop_outputs(derived, program.outputs)
    Rewriter.replace_op(program, derived, new_results=[])
    module.verify()
    if options:  # a compiled program's derivative is compiled with its options
        return compile(module, **options)
    return module


def _compile_options(source, who: str) -> dict | None:
    """For a compiled program (`Program`, or one of passes over a mesh): what it was compiled
    from (`source`) and the options of `irfuse.compile` it was compiled with; None for
    anything else."""
    from irfuse.api.mesh_passes import MeshPassesProgram

    if not isinstance(source, (Program, MeshPassesProgram)):
        return None
    if source._spec is None:
        raise UsageError(f"{who}: program {source.name} was compiled from a tuning or a saved plan; give its source "
                         "(a path, KAS text, a Python function)")
    spec = dict(source._spec[1])
    if isinstance(spec["source"], tuple):  # a module's text
        from irfuse.dialects.context import parse_module

        spec["source"] = parse_module(spec["source"][1], spec.get("filename") or "<module>")
    spec.pop("filename", None)
    return spec


def _kas_module(source, filename: str | None, who: str):
    """A fresh module holding the `kas.program` of what `irfuse.compile` takes."""
    text, name, _function, front, given_module = _source_of(source, filename, who)
    if front is not None:
        return front.module
    if given_module:
        return source.clone()
    from irfuse.frontend.irgen import compile_source

    return compile_source(text, name).module


def _source_of(source, filename: str | None, who: str = "irfuse.compile") -> tuple:
    """(text, name, function, front, given_module) of what `compile` was given: the text keys the
    program cache (a function's or a module's IR as text); `front` is a function's frontend
    result, kept for its first compile."""
    function = source.fn if isinstance(source, PythonProgram) else (source if inspect.isfunction(source) else None)
    if function is not None:
        from irfuse.dialects.context import module_text
        from irfuse.frontend.python import compile_function

        front = compile_function(function)  # cheap: the key is the IR it gives
        return module_text(front.module), f"{function.__qualname__} (Python)", function, front, False
    if _is_module(source):
        from xdsl.utils.exceptions import VerifyException

        from irfuse.dialects.context import module_text
        from irfuse.dialects.kas import program_of

        try:
            name = filename or program_of(source).sym_name.data
            source.verify()
        except (ValueError, VerifyException) as e:
            raise UsageError(f"irfuse.compile: the module given is not a valid kas program: {e}") from None
        lowered = next((op for op in source.walk() if op.dialect_name() == "fuse"), None)
        if lowered is not None:
            raise UsageError(f"irfuse.compile: the module given is already lowered (it holds {lowered.name}); "
                             "compile the kas program it was lowered from (irfuse-opt prints it before any "
                             "pass), or run a plan saved by `irfuse compile -o DIR` with `irfuse run --plan DIR`")
        return module_text(source), name, None, None, True
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _is_source_text(source)):
        path = os.fspath(source)
        return read_source(path), path, None, None, False
    if isinstance(source, str):
        return source, filename or "<source>", None, None, False
    if isinstance(source, Program) or type(source).__name__ == "MeshPassesProgram":
        raise UsageError(f"{who} takes what it compiles (a path, KAS source text, a Python function or a kas "
                         f"module), not a compiled {type(source).__qualname__}: program {source.name} is compiled "
                         "already")
    raise UsageError(f"{who} takes a path, KAS source text, a Python function or a kas module, not a "
                     f"{type(source).__qualname__}")


@dataclass
class _Compilation:
    """One program's source and `compile` options: the `Program` of each layout and set of
    strided views it is called with (`variant`), from the disk cache or compiled and stored
    there, kept in memory by everything that decides what compiling gives."""

    text: str
    name: str
    function: object | None  # a Python function's frontend result is `front`
    front: object | None
    given_module: bool
    dtype: str
    backend: str
    pipeline: str | None
    n: int | None
    profile: str
    arch: str | None
    first_layout: str
    registers: str | None

    def __post_init__(self) -> None:
        self.table = _register_table_text(self.registers)

    def key(self, layout: str, strides: dict) -> str:
        """The disk cache's key of the variant for `layout` and `strides`."""
        f = self.function
        return program_key(
            None, text=self.text, name=self.name, dtype=self.dtype, backend=self.backend, pipeline=self.pipeline,
            n=self.n or DEFAULT_BATCH, profile=asdict(load_profile(self.profile)), layout=layout, strides=strides,
            arch=self.arch or (default_arch() if self.backend == "cuda" else None),
            where=(f.__code__.co_filename, f.__code__.co_firstlineno) if f else None,  # type: ignore[attr-defined]
            registers=self.table)

    def artifact(self, layout: str, strides: dict) -> tuple:
        """(artifact, warnings) from the disk cache, or compiled (and stored there)."""
        key = self.key(layout, strides)
        hit = program_cache.load(key)
        if hit is not None:
            return hit
        from irfuse.dialects.context import parse_module
        from irfuse.driver.compile import PlanningOptions, compile_frontend, compile_text
        from irfuse.frontend.irgen import FrontendResult
        from irfuse.frontend.python import compile_function

        planning = PlanningOptions(n=self.n or DEFAULT_BATCH, profile=self.profile, registers=self.registers)
        gpu = self.backend == "cuda"
        if self.given_module:
            made = compile_frontend(FrontendResult(parse_module(self.text, self.name)), self.name, self.pipeline,
                                    self.dtype, gpu, self.arch, planning, layout, strides)
        elif self.function is not None:
            # (the passes consume the IR: the first compile takes the frontend result made for the key)
            first = (layout, strides) == (self.first_layout, {}) and self.front is not None
            front, self.front = (self.front, None) if first else (compile_function(self.function), self.front)
            made = compile_frontend(front, self.function.__name__, self.pipeline, self.dtype, gpu,  # type: ignore
                                    self.arch, planning, layout, strides)
        else:
            made = compile_text(self.text, self.name, self.pipeline, self.dtype, compile_gpu=gpu, arch=self.arch,
                                planning=planning, layout=layout, strides=strides)
        program_cache.store(key, *made)
        return made

    def spec(self) -> dict:
        """What the program is compiled from again where it is unpickled (a Dask worker): the
        source itself, not a path the worker may not see."""
        source = self.function if self.function is not None else ("ir", self.text) if self.given_module else self.text
        return dict(source=source, dtype=self.dtype, backend=self.backend, pipeline=self.pipeline, n=self.n,
                    profile=self.profile, arch=self.arch, filename=None if self.function is not None else self.name,
                    layout=self.first_layout, registers=self.registers)

    def variant(self, layout: str, strides: dict | None = None, warn: bool = False) -> Program:
        """The program for `layout` and `strides`, made on first use and kept (its warnings
        said once, at the caller of `irfuse.compile`, where `warn`)."""
        strides = strides or {}
        key = (self.text, self.name, self.dtype, self.backend, self.pipeline, self.n or DEFAULT_BATCH, self.profile,
               self.table, self.arch, layout, tuple(sorted(strides.items())))
        return _kept(key, lambda: self._make(layout, strides, warn))

    def _make(self, layout: str, strides: dict, warn: bool) -> Program:
        passes = self._mesh_passes(layout, strides, warn)
        if passes is not None:
            return passes
        artifact, diagnostics = self.artifact(layout, strides)
        if warn:  # the variant for the other layout has the same diagnostics: said once
            for d in diagnostics:
                # at the caller of irfuse.compile: _make, its lambda, _kept, variant, compile
                warnings.warn(d.render(), IrfuseWarning, stacklevel=6)
        program = Program(artifact, self.backend, diagnostics, variant=self.variant, strides=strides)
        program._spec = (_program_from_spec, self.spec())
        return program


    def _mesh_passes(self, layout: str, strides: dict, warn: bool):
        """A program over a mesh with nodal statements: its passes over nodes and elements, each
        compiled (and cached) as a program of its own (`irfuse.api.mesh_passes`); None for any
        other program. (Only a program that says `nodal` is run through the frontend here.)"""
        if "nodal" not in self.text:
            return None
        from irfuse.dialects.context import parse_module
        from irfuse.frontend.irgen import FrontendResult, compile_source
        from irfuse.frontend.python import compile_function
        from irfuse.transforms.node_phases import has_nodal_statements

        front = (FrontendResult(parse_module(self.text, self.name)) if self.given_module else
                 compile_function(self.function) if self.function is not None else
                 compile_source(self.text, self.name))
        if not has_nodal_statements(front.module):
            return None
        if layout != "aos" or strides:
            raise UsageError(f"program {self.name} runs over a mesh on arrays of structures only")
        from irfuse.api.mesh_passes import compile_mesh_passes

        if warn:
            for d in front.warnings:
                # at the caller of irfuse.compile: _mesh_passes, _make, its lambda, _kept, variant, compile
                warnings.warn(d.render(), IrfuseWarning, stacklevel=7)
        options = dict(dtype=self.dtype, backend=self.backend, pipeline=self.pipeline, n=self.n, profile=self.profile,
                       arch=self.arch, registers=self.registers)
        with warnings.catch_warnings():  # (the passes' own: the program's were said above)
            warnings.simplefilter("ignore", IrfuseWarning)
            program = compile_mesh_passes(front.module, self.name, front.warnings, self.backend, self.dtype,
                                          lambda module, filename: compile(module, filename=filename, **options))
        program._spec = (_program_from_spec, self.spec())
        return program


def _program_from_spec(spec: dict, layout: str, strides: tuple) -> Program:
    """A pickled `Program` again: compiled from what it was compiled from (kept per process)."""
    if isinstance(spec["source"], tuple):  # a module's text
        from irfuse.dialects.context import parse_module

        spec = {**spec, "source": parse_module(spec["source"][1], spec.get("filename") or "<module>")}
    return compile(**spec)._for(layout, dict(strides))


def _register_table_text(path) -> str | None:
    """The register table's text (part of the compile's key), or a refusal naming the file."""
    if path is None:
        return None
    try:
        with open(os.fspath(path)) as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"registers={os.fspath(path)!r}: cannot read the register table: {e.strerror}") from None


def _is_module(source) -> bool:
    """Whether `source` is an xDSL module (only a process that imported xDSL can hold one)."""
    builtin = sys.modules.get("xdsl.dialects.builtin")
    return builtin is not None and isinstance(source, builtin.ModuleOp)


def _chosen_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise UsageError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    return ("cuda" if gpu_available() else "cpu") if backend == "auto" else backend


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
    if not isinstance(source, (str, os.PathLike)) or (isinstance(source, str) and _is_source_text(source)):
        raise UsageError("tuning= recompiles the program's file: give its path as the source")
    path = os.path.abspath(os.fspath(source))
    chosen = _chosen_backend(backend)
    from irfuse.driver.tuned import compile_tuned

    program = _kept(("tuning", os.path.abspath(tuning), path, read_source(path), chosen, arch),
                    lambda: Program(compile_tuned(tuning, path, arch, compile_gpu=chosen == "cuda"), chosen, []))
    if dtype is not None and dtype != program.compiled.dtype:
        raise UsageError(f"{tuning}: the tuning was made for dtype '{program.compiled.dtype}', not '{dtype}'")
    if layout is not None and layout != program.layout:
        raise UsageError(f"{tuning}: the tuning was made for layout '{program.layout}', not '{layout}'")
    return program
