"""`irfuse`: compile, run and verify KAS programs.

    irfuse run FILE      compile, execute (GPU if usable, else CPU), verify against NumPy
    irfuse compile FILE  write kernels.cu, kernels.cubin, manifest.json and the IR to a directory
    irfuse ops [NAME]    the op library

`irfuse run` is a user of the library interface like any other: `irfuse.compile` (or a plan
directory's artifact) gives a `Program`, which runs the inputs, times its runs
(`Program.time`) and checks the outputs against the NumPy reference.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from irfuse._version import __version__
from irfuse.artifact.arrays import ELEMENT_TYPES, LAYOUTS, element_type
from irfuse.diagnostics import Diagnostic, IrfuseError, UsageError, print_diagnostics
from irfuse.driver.options import DEFAULT_BATCH, backend_profile
from irfuse.tools.report import million_elements_per_second

# (Each command imports what it needs: `irfuse run --plan DIR` runs a saved plan with the
# runtime alone, no compiler and no xDSL imported.)

DEFAULT_N = {"cuda": DEFAULT_BATCH, "cpu": 4096, "numpy": 100_000}
DEFAULT_REPEAT = {"cuda": 20, "cpu": 5}  # timed runs of `irfuse run` (the CPU's at n = 4096 take milliseconds)

console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _working(what: str):
    """A spinner saying what runs, on a terminal only (a pipe or a file gets the results
    alone), gone when it is done: compiles and references can take seconds."""
    return console.status(what, spinner="dots") if console.is_terminal else contextlib.nullcontext()


def _byte_size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    digits = t.rstrip("KMGT")
    try:
        value = float(digits) * units[t[len(digits):]]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"expected a size in bytes (4096, 512M, 2G), got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got '{text}'")
    return int(value)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _add_layout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layout", choices=list(LAYOUTS), default=None,
                   help="how the global arrays hold the batch: aos, (N, *shape), the default; soa, (*shape, N) "
                        "(for .npz files too)")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", choices=list(ELEMENT_TYPES), default=None, help="element type (default f32)")
    p.add_argument("--pipeline", default=None,
                   help="pass pipeline, e.g. 'kas-dce,fuse-each' (default: the default pipeline)")
    p.add_argument("--arch", default=None, help="NVRTC target, e.g. sm_90 (default: the GPU present, else sm_90)")
    p.add_argument("--library", action="append", default=[], metavar="FILE.py",
                   help="load user-defined ops from a Python file (repeatable)")
    _add_planning(p)


def _add_planning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None, help="device profile the fusion search plans for "
                   "(h100, h200, cpu, or one saved by 'irfuse calibrate'; default: cpu for runs on the CPU "
                   "backend, else h100)")
    p.add_argument("--registers", default=None, metavar="FILE.json",
                   help="registers and spills of kernels compiled before (the registers.json 'irfuse compile' "
                        "writes): the cost model uses them instead of its estimates; 'ptxas' (CUDA): the plan's "
                        "kernels compiled and the search run again with their figures until it settles")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="irfuse", description="GPU kernel-fusion compiler for batched small-matrix programs")
    ap.add_argument("--version", action="version", version=f"irfuse {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="compile, execute and verify a program")
    run.add_argument("file", nargs="?", help="a .kas program (omit with --plan)")
    run.add_argument("--backend", choices=["auto", "cuda", "cpu", "numpy"], default="auto",
                     help="auto: the GPU when usable, else the CPU (default)")
    run.add_argument("--n", type=int, default=None,
                     help="batch size (default: 4194304 on cuda, 4096 on cpu, 100000 on numpy)")
    run.add_argument("--seed", type=_non_negative, default=0, help="seed of the random inputs (0 or more)")
    run.add_argument("--repeat", type=int, default=None, help="timed repetitions (default 20 on cuda, 5 on cpu)")
    run.add_argument("--inputs", metavar="FILE.npz", help="read inputs from an .npz file instead of random data")
    run.add_argument("--save", metavar="FILE.npz", help="write the outputs to an .npz file")
    run.add_argument("--plan", metavar="DIR", help="run a plan written by 'irfuse compile'")
    run.add_argument("--memory-budget", metavar="BYTES", type=_byte_size, default=None,
                     help="run the batch from host memory in chunks that fit this much device memory (a number "
                          "of bytes, or with K, M, G: 512M, 2G); a terminal shows a progress bar once a run "
                          "takes over a second")
    run.add_argument("--verify", choices=["auto", "all", "sample", "none"], default="auto",
                     help="elements checked against the NumPy reference: all, a seeded sample of 100000, or "
                          "none (auto: all up to 100000 elements, a sample beyond)")
    _add_common(run)
    _add_layout(run)

    comp = sub.add_parser("compile", help="write the CUDA source, cubin and manifest of a program")
    comp.add_argument("file", nargs="?")
    comp.add_argument("--from-tuning", metavar="FILE.json",
                      help="compile the fastest plan recorded by 'irfuse tune' (its program and pipeline)")
    comp.add_argument("-o", "--output", required=True, metavar="DIR")
    _add_common(comp)
    _add_layout(comp)

    plan = sub.add_parser("plan", help="search the best fusion plans and show them")
    plan.add_argument("file")
    plan.add_argument("--top", type=int, default=10)
    plan.add_argument("--max-size", type=int, default=8, help="most calls in one kernel")
    plan.add_argument("--n", type=int, default=DEFAULT_BATCH, help="batch size to predict for")
    plan.add_argument("--dtype", choices=list(ELEMENT_TYPES), default="f32")
    plan.add_argument("--library", action="append", default=[], metavar="FILE.py")
    _add_planning(plan)

    tune = sub.add_parser("tune", help="compile the N best plans, time each on the backend (the GPU, or the CPU with "
                                      "--backend cpu), keep the fastest")
    tune.add_argument("file")
    tune.add_argument("--top", type=int, default=10)
    tune.add_argument("--max-size", type=int, default=8)
    tune.add_argument("--n", type=int, default=None,
                      help="batch size (default: as 'run' on the backend: 4194304 on cuda, 4096 on cpu)")
    tune.add_argument("--repeat", type=int, default=30, help="timed runs per plan, over all rounds (default 30)")
    tune.add_argument("--rounds", type=int, default=3,
                      help="interleaved rounds: each times every plan once more, in alternating order (default 3)")
    tune.add_argument("--back-to-back", type=int, default=1, metavar="K",
                      help="each timing covers K runs issued one after another, divided by K (steady state); "
                           "default 1, one run per timing")
    tune.add_argument("--backend", choices=["cuda", "cpu"], default="cuda",
                      help="cuda (default): time on the GPU; cpu: run and verify every plan on the CPU "
                           "(its times rank the host execution, not the GPU)")
    tune.add_argument("--json", default=None, metavar="FILE",
                      help="write the results here (JSON; with --save-best and no --json: DIR/tuning.json; "
                           "otherwise none)")
    tune.add_argument("--plot", default=None, metavar="FILE.png", help="measured against predicted throughput")
    tune.add_argument("--save-best", default=None, metavar="DIR", help="write the fastest plan as 'irfuse compile' does")
    _add_common(tune)
    _add_layout(tune)

    cal = sub.add_parser("calibrate", help="measure the GPU present (or this CPU) and save a device profile for the "
                                           "cost model")
    cal.add_argument("--backend", choices=["cuda", "cpu"], default="cuda",
                     help="cuda: the GPU present (saved under its name); cpu: this machine's CPU, for the CPU "
                          "backend (saved as the profile 'cpu')")
    cal.add_argument("--n", type=int, default=None,
                     help="--backend cpu: elements of the copy probe (default: four times the last-level cache)")

    ops = sub.add_parser("ops", help="list the op library, or show one op")
    ops.add_argument("name", nargs="?")
    ops.add_argument("--library", action="append", default=[], metavar="FILE.py")
    return ap


def _load_libraries(paths: list[str]) -> None:
    if not paths:
        return  # (nothing of the compiler imported: a saved plan runs without it)
    import irfuse.driver.library  # noqa: F401 -- the check every hand-written implementation passes
    from irfuse.library.catalogue import load_library_file

    for p in paths:
        load_library_file(p)


def _choose_backend(name: str) -> str:
    from irfuse.runtime.cuda_device import gpu_available

    if name != "auto":
        return name
    return "cuda" if gpu_available() else "cpu"


def _save_path(path: str | None) -> str | None:
    """Where `--save` writes (checked before anything runs, so that no result is lost): an
    .npz file in a directory that exists."""
    if path is None:
        return None
    if os.path.isdir(path):
        raise UsageError(f"--save {path} names a directory; give a file name such as {os.path.join(path, 'out.npz')}")
    if not path.endswith(".npz"):
        path += ".npz"  # what np.savez would write: say so, rather than write elsewhere
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"--save {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--save {path}: the directory {parent} is not writable")
    return path


def _check_memory(interface, n: int, itemsize: int, what: str) -> None:
    """Refuses a batch whose inputs and outputs alone exceed this machine's memory."""
    from irfuse.artifact.program_io import effective_bytes

    need = effective_bytes(interface, n, itemsize) * 2  # the reference holds a float64 copy too
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > have:
        raise UsageError(f"{what}: a batch of {n:,} elements needs about {need / 2**30:,.1f} GiB for its inputs, "
                         f"outputs and reference; this machine has {have / 2**30:,.1f} GiB")


def _program_for_run(args, backend: str, n: int):
    """The `Program` `irfuse run` runs: compiled from the file (through `irfuse.compile`, its
    disk cache included), or the artifact of a plan directory, with the warnings to print."""
    if args.plan:
        from irfuse.api.programs import Program
        from irfuse.api.staged_programs import StagedProgram
        from irfuse.artifact.stages import StagedArtifact, load_plan

        plan = load_plan(args.plan)
        kind = StagedProgram if isinstance(plan, StagedArtifact) else Program
        return kind(plan, "cpu" if backend == "numpy" else backend, []), []
    import warnings

    import irfuse.api
    from irfuse.driver.sources import read_source

    with _working(f"compiling {os.path.basename(args.file)}"), warnings.catch_warnings(record=True):
        warnings.simplefilter("always", irfuse.api.IrfuseWarning)
        program = irfuse.api.compile(read_source(args.file, who=f"irfuse {args.command}"), dtype=args.dtype or "f32",
                                     backend="cpu" if backend == "numpy" else backend, pipeline=args.pipeline,
                                     n=n, profile=args.profile or backend_profile(backend), arch=args.arch,
                                     layout=args.layout or "aos", registers=args.registers)
    return program, program.warnings


def _reference(program, why: str):
    """The program's compiled side (its reference): None, with a note, where the compiler cannot
    be imported (a plan run by the runtime alone); `why` says what it was for."""
    try:
        return program.compiled
    except ImportError as e:
        console.print(f"[yellow]not verified: {escape(why)} needs irfuse's compiler, which cannot be imported "
                      f"here ({escape(str(e))})[/yellow]")
        return None


def cmd_run(args) -> int:
    from irfuse.artifact.program_io import Interface, batch_size, effective_bytes, load_inputs, random_inputs

    _load_libraries(args.library)
    if args.file is None and args.plan is None:
        raise UsageError("irfuse run needs a .kas file or --plan DIR")
    if args.plan is not None:
        given = [flag for flag, value in (("a .kas file", args.file), ("--dtype", args.dtype),
                                           ("--pipeline", args.pipeline), ("--registers", args.registers),
                                           ("--profile", args.profile), ("--layout", args.layout))
                 if value is not None]
        if given:
            raise UsageError(f"--plan {args.plan} runs a program compiled before, with its own type and kernels: "
                             f"{', '.join(given)} cannot be given with it")
    save = _save_path(args.save)
    backend = _choose_backend(args.backend)
    n = args.n if args.n is not None else DEFAULT_N[backend]
    if n < 1 and args.inputs is None:
        raise UsageError(f"--n must be at least 1, got {n}")
    if args.repeat is not None and args.repeat < 0:
        raise UsageError(f"--repeat counts timed runs: 0 or more, got {args.repeat}")
    program, warnings = _program_for_run(args, backend, n)
    print_diagnostics(warnings)
    if program.nodal or program.index_inputs:
        return _run_on_mesh(program, args, backend, n, save)
    artifact = program.artifact
    interface = Interface.of_host(artifact.host)
    layout, dtype = artifact.layout, artifact.dtype
    np_dtype = element_type(dtype).numpy
    if args.inputs:
        converted: list[str] = []
        inputs = load_inputs(args.inputs, interface, np_dtype, layout, converted)
        if converted:  # (the API converts no array: a file's values are converted where they fit, and said)
            console.print(f"{escape(args.inputs)}: converted to the run's type ({', '.join(converted)}); their values "
                          f"fit it")
        n = batch_size(inputs, interface)
        if n < 1:
            raise UsageError(f"{args.inputs}: the inputs hold 0 elements; the batch size must be at least 1")
    else:
        _check_memory(interface, n, element_type(dtype).itemsize, f"--n {n}")
        inputs = random_inputs(interface, n, args.seed, np_dtype)
    whole = interface.uniform  # no batch axis: no layout, not sampled
    title = f"{artifact.meta.get('source', args.file or args.plan)}: backend {backend}, n = {n}, {dtype}"
    if layout != "aos":
        title += f", {layout}"
    if backend == "numpy":
        return _run_reference(program, inputs, n, layout, title, save)
    arrays = _laid_out(inputs, layout, whole)
    try:
        if args.memory_budget is not None:
            repeat = args.repeat if args.repeat is not None else (3 if backend == "cuda" else 1)
            outputs, times, chunks = _run_in_chunks(program, backend, arrays, args.memory_budget, repeat)
            title += _on_gpu(program) + f", {chunks} chunk{'s' if chunks > 1 else ''} from host memory"
            how = ", end to end from host memory"
        else:
            repeat = args.repeat if args.repeat is not None else DEFAULT_REPEAT[backend]
            with _working(f"running on {backend}" + (f", {repeat} timed runs" if repeat else "")):
                outputs, times = _run_once_and_time(program, backend, arrays, repeat)
            title += _on_gpu(program)
            how = ""
        checks = _verify(program, inputs, outputs, n, layout, args)
        _print_kernels(artifact, getattr(program._device, "resources", {}))
        _print_outputs(title, outputs, checks)
    finally:
        program.close()
    if times:
        t = float(np.median(times))
        gbs = effective_bytes(interface, n, artifact.itemsize) / t / 1e9
        console.print(f"time (median of {len(times)}{how}): {t * 1e3:.3f} ms, {million_elements_per_second(n, t)} M "
                      f"elements/s, {gbs:.1f} GB/s effective (inputs read once + outputs written once)")
    for c in checks or []:
        if not c.ok:
            console.print(f"[red]{escape(c.describe())}[/red]")
        elif c.overflow:
            console.print(f"[yellow]{escape(c.describe())}[/yellow]")
    _save(save, outputs)
    if checks is None:
        if args.verify == "none":
            console.print("[yellow]not verified (--verify none)[/yellow]")
        return 0
    ok = all(c.ok for c in checks)
    what = "" if checks.elements == n else (f" on a seeded sample of {checks.elements:,} of the {n:,} elements "
                                            "(--verify all checks every one)")
    console.print(f"[green]verified against the NumPy reference{what}[/green]" if ok
                  else f"[red]verification FAILED{what}[/red]")
    return 0 if ok else 1


def _run_on_mesh(program, args, backend: str, n: int, save) -> int:
    """`irfuse run` of a program over a mesh: through the `Program` call (NumPy arrays, in
    chunks with --memory-budget), on the inputs of --inputs (nodal arrays, connectivities,
    per-element arrays) or on a random mesh of n elements over n + 3 nodes (node numbers drawn
    at random, so no locality); every element and node checked against the reference."""
    from irfuse.api.mesh_calls import mesh_verification

    if backend == "numpy":
        raise UsageError("--backend numpy runs the reference alone; a program over a mesh runs on cpu or cuda")
    if args.layout not in (None, "aos"):
        raise UsageError("a program over a mesh runs on arrays of structures (--layout aos)")
    if args.inputs:
        from irfuse.artifact.program_io import open_inputs, read_input

        with open_inputs(args.inputs) as f:
            inputs = {k: read_input(args.inputs, f, k) for k in f.files}
        missing = [k for k in program.inputs if k not in inputs]
        if missing:
            raise UsageError(f"{args.inputs}: no array for input(s) {', '.join(map(repr, missing))}")
        nodes = None
    else:
        rng = np.random.default_rng(args.seed)
        nodes = n + 3
        inputs = {}
        for name in program.inputs:
            shape = program.shapes[name]
            if name in program.index_inputs:
                inputs[name] = rng.integers(0, nodes, size=(n, *shape)).astype(np.int32)
            else:
                count = () if name in program.uniform else (nodes if name in program.nodal else n,)
                inputs[name] = rng.uniform(-1, 1, (*count, *shape)).astype(program.dtype)
    repeat = args.repeat if args.repeat is not None else DEFAULT_REPEAT[backend]
    call = {"nodes": nodes, "memory_budget": args.memory_budget}
    try:
        with _working(f"running on {backend}" + (f", {repeat} timed runs" if repeat else "")):
            outputs = program(**inputs, **call)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                program(**inputs, **call)
                times.append(time.perf_counter() - start)
        elements = len(inputs[next(iter(sorted(program.index_inputs)))]) if program.index_inputs else n
        m = nodes if nodes is not None else next(len(inputs[k]) for k in program.inputs if k in program.nodal)
        checks = None
        if args.verify != "none" and _reference(program, "checking the outputs") is not None:
            checks = mesh_verification(program, inputs, outputs, elements, m).checks
        title = (f"{args.file or args.plan}: backend {backend}, {elements:,} elements, {m:,} nodes"
                 + ("" if args.inputs else " (a random mesh)") + _on_gpu(program))
        _print_outputs(title, dict(zip(program.outputs, outputs)), checks)
    finally:
        program.close()
    if times:
        console.print(f"time (median of {len(times)}, end to end from host memory): "
                      f"{float(np.median(times)) * 1e3:.3f} ms")
    _save(save, dict(zip(program.outputs, outputs)))
    if checks is None:
        if args.verify == "none":
            console.print("[yellow]not verified (--verify none)[/yellow]")
        return 0
    ok = all(c.ok for c in checks)
    for c in checks:
        if not c.ok:
            console.print(f"[red]{escape(c.describe())}[/red]")
    console.print("[green]verified against the NumPy reference[/green]" if ok else "[red]verification FAILED[/red]")
    return 0 if ok else 1


def _laid_out(inputs: dict, layout: str, whole) -> dict:
    from irfuse.artifact.arrays import arrays_from_aos

    return arrays_from_aos(inputs, layout, whole)


def _on_gpu(program) -> str:
    name = getattr(program._device, "gpu_name", None)
    return f" on {name}" if name else ""


def _run_once_and_time(program, backend: str, arrays: dict, repeat: int) -> tuple[dict, list[float]]:
    """The outputs of one call (host arrays, in the program's layout) and `repeat` timings
    (`Program.time`): on the GPU the inputs are uploaded once and the calls run on GPU arrays
    (PyCUDA's), in place, as a time-stepping code's would."""
    if backend != "cuda":
        outputs = dict(program(**arrays).items())
        return outputs, program.time(**arrays, repeat=repeat) if repeat else []
    program.opened_device()  # the context current in this thread (or the refusal without a GPU)
    from pycuda import gpuarray

    # (np.asarray keeps a uniform scalar's shape (); np.ascontiguousarray would make it (1,))
    on_gpu = {k: gpuarray.to_gpu(np.asarray(a, order="C")) for k, a in arrays.items()}
    got = program(**on_gpu)
    times = program.time(**on_gpu, out=tuple(got), repeat=repeat) if repeat else []
    program(**on_gpu, out=tuple(got))  # the outputs of a timed run's call, as the first
    return {name: a.get() for name, a in got.items()}, times


def _run_in_chunks(program, backend: str, arrays: dict, budget: int, repeat: int):
    """The batch run from host memory in chunks within `budget` bytes of device memory, a
    progress bar on a terminal for a run past a second; then `repeat` timed calls, end to end.
    (outputs, times, chunks)."""
    from irfuse.api.progress import progress_bar

    with progress_bar(f"running on {backend}", after_s=1.0, stream=sys.stdout) if console.is_terminal \
            else contextlib.nullcontext(None) as report:
        outputs = program(**arrays, memory_budget=budget, progress=report or False)
    chunks = program.last_chunks or 1
    times = program.time(**arrays, out=tuple(outputs), memory_budget=budget, repeat=repeat, warmup=0) if repeat else []
    return dict(outputs.items()), times, chunks


def _verify(program, inputs: dict, outputs: dict, n: int, layout: str, args):
    """The checks of the outputs (host arrays in `layout`) against the reference, on the
    elements `--verify` picks; None when not verified."""
    if args.verify == "none":
        return None
    compiled = _reference(program, "checking the outputs")
    if compiled is None:
        if args.verify != "auto":
            raise UsageError(f"--verify {args.verify} needs irfuse's compiler (the NumPy reference evaluates the "
                             "program before lowering): it cannot be imported here")
        return None
    from irfuse.artifact.arrays import arrays_to_aos
    from irfuse.verification.reference import run_references
    from irfuse.verification.verify import check_outputs, subset, verified_elements

    reference = compiled.reference_program
    index = verified_elements(reference, n, args.verify, args.seed)
    whole = program.uniform
    picked = subset(inputs, index, whole)
    with _working(f"verifying {len(index):,} elements against the NumPy reference"):
        checks = check_outputs(subset(arrays_to_aos(outputs, layout, whole), index, whole),
                               run_references(reference, picked, compiled.dtype, len(index), compiled.sum_by),
                               compiled.dtype)
    return _Checks(checks, len(index))


class _Checks(list):
    """The checks of every output, and on how many elements they were made."""

    def __init__(self, checks, elements: int):
        super().__init__(checks)
        self.elements = elements


def _run_reference(program, inputs: dict, n: int, layout: str, title: str, save) -> int:
    """`--backend numpy`: the float64 NumPy reference alone, its outputs and its time."""
    from irfuse.artifact.arrays import arrays_from_aos
    from irfuse.verification.reference import run_reference

    compiled = _reference(program, "the NumPy reference")
    if compiled is None:
        raise UsageError("--backend numpy runs the NumPy reference, which needs irfuse's compiler")
    np_dtype = element_type(compiled.dtype).numpy
    t0 = time.perf_counter()
    with _working(f"evaluating the NumPy reference on {n:,} elements"):
        outputs = arrays_from_aos({k: v.astype(np_dtype)
                                   for k, v in run_reference(compiled.reference_program, inputs, n).items()},
                                  layout, program.uniform)
    ref_time = time.perf_counter() - t0
    _print_outputs(title, outputs, None)
    console.print(f"reference time {ref_time * 1e3:.1f} ms")
    _save(save, outputs)
    return 0


def _save(path: str | None, outputs: dict[str, np.ndarray]) -> None:
    if path:
        # (checked before the run, `_save_path`; the write itself can still fail: a directory
        # that takes no new files, a full disk)
        try:
            np.savez(path, **outputs)
        except OSError as e:
            raise UsageError(f"--save {path}: cannot write the outputs: {e.strerror or e}") from None
        console.print(f"outputs written to {path}")


def _print_kernels(plan, measured: dict | None = None) -> None:
    """The kernels' table; registers from the ptxas report, else from the driver (`measured`:
    what a device read of kernels the report left out)."""
    t = Table(title="kernels")
    for col in ("kernel", "block (bx, by)", "calls", "regs", "spills", "shared B", "barriers (before elim.)",
                "values reg/shared"):
        t.add_column(col, overflow="fold")  # long kernel names wrap on a narrow terminal, never cut
    for k in plan.kernels:
        r = plan.resources(k.name) or (measured or {}).get(k.name)
        per = f", {k.per_thread} a thread" if k.per_thread != 1 else ""
        t.add_row(k.name, f"({k.bx}, {k.by}){per}", escape(" ".join(k.calls)),
                  str(r.registers) if r else "-",
                  str(r.spill_stores + r.spill_loads) if r else "-",
                  str(k.total_shared_bytes(plan.itemsize)),
                  f"{k.barriers}" + (f" ({k.barriers_before})" if k.barriers_before is not None else ""),
                  f"{k.register_values}/{k.shared_values}")
    console.print(t)


def _print_outputs(title: str, outputs: dict[str, np.ndarray], checks) -> None:
    t = Table(title=title)
    for col in ("output", "shape", "checksum (sum)", "largest |x|"):
        t.add_column(col)
    if checks is not None:
        for col in ("error / element's scale", "max abs error", "error / allowed", "status"):
            t.add_column(col)
    by_name = {c.name: c for c in checks or []}
    for name, a in outputs.items():
        with np.errstate(all="ignore"):
            row = [name, str(a.shape), f"{float(np.sum(a, dtype=np.float64)):.9g}",
                   f"{float(np.max(np.abs(a))) if a.size else 0.0:.9g}"]
        if checks is not None:
            c = by_name[name]
            row += [f"{c.rel_error:.2e}", f"{c.max_abs_error:.2e}", f"{c.worst:.2g}", c.status]
        t.add_row(*row)
    console.print(t)


def cmd_compile(args) -> int:
    from irfuse.driver.compile import compile_from
    from irfuse.driver.options import compile_options
    from irfuse.driver.sources import read_source
    from irfuse.driver.tuned import compile_tuned

    _load_libraries(args.library)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"-o {args.output} is a file; irfuse compile writes a directory (kernels.cu, "
                         "kernels.cubin, manifest.json, ...)")
    if args.from_tuning:
        if args.layout is not None:
            raise UsageError("--from-tuning compiles the plan for the layout it was tuned for: --layout cannot be "
                             "given with it")
        plan, warnings = compile_tuned(args.from_tuning, args.file, args.arch), []
    elif args.file is None:
        raise UsageError("irfuse compile needs a .kas file or --from-tuning FILE.json")
    else:
        options = compile_options(args.dtype, "cuda", args.pipeline, profile=args.profile or "h100", arch=args.arch,
                                  layout=args.layout, registers=args.registers)
        with _working(f"compiling {os.path.basename(args.file)}"):
            plan, warnings = compile_from(read_source(args.file, who=f"irfuse {args.command}"), options)
    print_diagnostics(warnings)
    written = plan.save(args.output)
    for stage in getattr(plan, "stages", [plan]):  # (a program of several stages: each one's kernels)
        _print_kernels(getattr(stage, "artifact", stage))
    cubins = {a.cubin.arch for a in (s.artifact for s in plan.stages)} if hasattr(plan, "stages") else (
        {plan.cubin.arch} if plan.cubin is not None else set())
    arch = f" ({', '.join(sorted(cubins))})" if cubins else ""
    console.print(f"wrote {args.output}/" + ", ".join(name + (arch if name.endswith("kernels.cubin") else "")
                                                       for name in written))
    return 0


def _plan_rows(dags, plans, n):
    from irfuse.transforms.barriers import barrier_after_every_op

    rows = []
    for k, p in enumerate(plans):
        kernels = []
        for c in sorted(p.configs, key=lambda c: (c.dag, c.group)):
            regs = sum(1 for v in c.model.values.values() if not v.shared)
            before = barrier_after_every_op(c.model).barrier_count()
            runs = dags[c.dag].multiplier  # launched this many times by loops on the host
            per = f" {c.model.per_thread} a thread," if c.model.per_thread != 1 else ""
            kernels.append(f"{f'{runs}x ' if runs > 1 else ''}[{c.describe(dags)}] ({c.model.bx},{c.model.by}){per} "
                           f"{c.model.shared_bytes()} B, "
                           f"{c.cost.registers} regs, {c.model.barrier_count()} barriers ({before} before "
                           f"elimination), {regs}/{len(c.model.values)} values in registers")
        rows.append((k, p, kernels))
    return rows


def cmd_plan(args) -> int:
    from irfuse.driver.options import compile_options
    from irfuse.driver.planning import search
    from irfuse.driver.sources import read_source

    from rich.progress import Progress

    _load_libraries(args.library)
    if args.n < 1:
        raise UsageError(f"--n must be at least 1, got {args.n}")
    options = compile_options(args.dtype, "cuda", n=args.n, profile=args.profile, registers=args.registers)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("searching fusion candidates", total=None)
        source = read_source(args.file, who=f"irfuse {args.command}")
        stages, warnings = search(source, options, args.top, args.max_size,
                                  lambda stage, k, total: progress.update(task, completed=k, total=total))
    print_diagnostics(warnings)
    for stage in stages:
        t = Table(title=f"{args.file}{stage.label}: {len(stage.plans)} best plans on {stage.profile.name}, "
                        f"n = {args.n}, {args.dtype} (searched in {stage.seconds:.2f} s)")
        for col in ("plan", escape("kernels: [ops] (bx,by) shared bytes, registers (from --registers, else "
                                   "estimated), barriers, values in registers"),
                    "predicted", "M elem/s"):
            t.add_column(col, overflow="fold")
        rows = [(str(k), p, kernels) for k, p, kernels in _plan_rows(stage.dags, stage.plans, args.n)]
        if stage.host is not None:  # the best plan runs a loop inside a kernel: the best with host loops too
            rows += [("host loops", p, kernels) for _, p, kernels in _plan_rows(*stage.host, args.n)]
        for k, p, kernels in rows:
            t.add_row(k, escape("\n".join(kernels)), f"{p.predicted_time * 1e3:.3f} ms",
                      million_elements_per_second(args.n, p.predicted_time))
        console.print(t)
        plans = stage.plans
        if plans and (plans[0].recomputed or plans[0].stored):
            console.print("values a later pass over the batch reads: " + "; ".join(
                [f"{v} computed again there" for v in plans[0].recomputed]
                + [f"{v} stored by the pass that makes it and read back" for v in plans[0].stored]), highlight=False)
        for note in plans[0].notes if plans else []:
            console.print(f"[yellow]note: {escape(note)}[/yellow]")
    return 0


def cmd_calibrate(args) -> int:
    if args.backend == "cpu":
        from irfuse.tools.calibrate_cpu import calibrate_cpu

        if args.n is not None and args.n < 1:
            raise UsageError(f"--n must be a positive number of elements, not {args.n}")
        calibrate_cpu(console, n=args.n)
        return 0
    if args.n is not None:
        raise UsageError("--n is for --backend cpu (the GPU's probes have fixed sizes)")
    from irfuse.tools.calibrate import calibrate

    calibrate(console)
    return 0


def cmd_tune(args) -> int:
    from irfuse.tools.tune import tune

    _load_libraries(args.library)
    if args.n is None:
        args.n = DEFAULT_N[args.backend]
    args.dtype = args.dtype or "f32"
    return tune(args, console)


def cmd_ops(args) -> int:
    from irfuse.library.catalogue import default_library
    from irfuse.library.families import FAMILIES
    from irfuse.library.implementations import load_store_pattern

    _load_libraries(args.library)
    lib = default_library()
    if args.name in FAMILIES and lib.get(args.name) is None:
        fam = FAMILIES[args.name]
        console.print(f"[bold]{escape(fam.signature)}[/bold]   ({escape(fam.doc)})")
        example = family_example(fam)
        console.print("a generic op: one instance for each operand types, named by them as IR and kernels show it"
                      + (f" (`irfuse ops {example}` shows one's definition and implementations)" if example else ""))
        return 0
    if args.name:
        op = lib.get(args.name)
        if op is None:
            close = lib.closest(args.name)
            raise UsageError(f"unknown op '{args.name}'" + (f"; did you mean {', '.join(close)}?" if close else ""))
        console.print(f"[bold]{op.named_signature()}[/bold]   {escape(op.definition)}   ({escape(op.doc)})")
        console.print(f"flops {op.flops}, bytes {op.bytes()} per element (f32)")
        for impl in lib.implementations(op):
            console.print(f"\n[bold]{escape(impl.name)}[/bold] ({impl.origin}): bx = {impl.bx}, "
                          f"recommended by = {impl.recommended_by}")
            t = Table(show_header=True, box=None)
            t.add_column("access pattern")
            t.add_column("#fuse.ap<start, block, stride, count[, noreg]>")
            for name, ap in zip([*op.operand_names, "result"], impl.aps):
                t.add_row(name, f"#fuse.ap<{ap.text()}>")
            for name, size in zip([*op.operand_names, "result"],
                                  [*(x.size for x in op.operand_types), op.result_type.size]):
                ls = load_store_pattern(size, impl.bx, impl.recommended_by)
                vec = load_store_pattern(size, impl.bx, impl.recommended_by, 4)
                t.add_row(f"load/store {name}", f"#fuse.ap<{ls.text()}>, 16-byte: #fuse.ap<{vec.text()}>")
            console.print(t)
            console.print(impl.device_source(), markup=False)
        return 0
    t = Table(title="irfuse op library")
    for col in ("op", "signature", "definition", "implementations (bx, recommended by)", "flops", "bytes (f32)"):
        t.add_column(col)
    for op in lib:
        impls = ", ".join(f"{i.name} ({i.bx}, {i.recommended_by})" for i in lib.implementations(op))
        t.add_row(op.name, op.named_signature(), escape(op.definition), impls, str(op.flops), str(op.bytes()))
    console.print(t)
    g = Table(title="generic ops: one instance per operand types, named by them (mmul_4x3_3x2)")
    for col in ("op", "signature", "what"):
        g.add_column(col)
    for fam in FAMILIES.values():
        g.add_row(fam.name, escape(fam.signature), escape(fam.doc))
    console.print(g)
    return 0


def family_example(fam) -> str | None:
    """The name of an instance of a generic op on 3x3 matrices, 3-vectors or scalars (the
    first such operand types it takes), or None (a family with parameters, as `item_K`)."""
    import itertools

    from irfuse.dialects.kas import ScalarType, kas_type_of_shape
    from irfuse.library.indexexpr import DefinitionError

    kinds = [kas_type_of_shape((3, 3)), kas_type_of_shape((3,)), ScalarType()]
    for arity in ([fam.arity] if fam.arity is not None else []):
        for types in itertools.product(kinds, repeat=arity):
            try:
                return fam.instantiate(types)[0]
            except (DefinitionError, ValueError, IndexError):
                continue
    return None


def example_path(name: str) -> str | None:
    """The example program shipped with irfuse called `name` (`bigfusion` or `bigfusion.kas`),
    or None: an installed wheel has no source tree to find `examples/` in."""
    from importlib.resources import files

    if os.sep in name or (os.altsep and os.altsep in name):
        return None
    path = files("irfuse") / "examples" / (name if name.endswith(".kas") else name + ".kas")
    return str(path) if path.is_file() else None


def example_names() -> list[str]:
    from importlib.resources import files

    folder = files("irfuse") / "examples"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".kas")) if folder.is_dir() else []


def _resolve_program(args) -> None:
    """A program argument that is not a file but names a shipped example runs that example."""
    file = getattr(args, "file", None)
    if file and not os.path.exists(file):
        found = example_path(file)
        if found is not None:
            args.file = found
        elif os.sep not in file and not file.endswith(".kas"):
            raise UsageError(Diagnostic(f"no such file, nor an example of that name (the examples shipped with "
                                        f"irfuse: {', '.join(example_names())})", file))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _resolve_program(args)
        return {"run": cmd_run, "compile": cmd_compile, "ops": cmd_ops, "plan": cmd_plan,
                "tune": cmd_tune, "calibrate": cmd_calibrate}[args.command](args)
    except IrfuseError as e:
        for d in e.diagnostics:
            d.file = d.file or "irfuse"  # about an option or the environment: say which tool
        print_diagnostics(e.diagnostics)
        return 1
    except OSError as e:
        # (a file a command writes that the system refuses after the checks made before it:
        # -o or --json in a directory that takes no new files, a full disk)
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"irfuse: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except MemoryError:
        # (--n sizes the batch only where no --inputs file gives it)
        advice = "smaller arrays in --inputs" if getattr(args, "inputs", None) else "a smaller --n"
        print(f"irfuse: error: out of memory (try {advice})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
