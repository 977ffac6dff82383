"""Running implementations alone on the CPU, against the reference.

Used to refuse a hand-written implementation that disagrees with its op's
definition (the op library is handed `check_implementation` when the driver is
imported), and by the tests that run every implementation of every op.
"""

from __future__ import annotations

import faulthandler
import functools
import mmap
import multiprocessing
import re
import signal

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block

from irfuse.backend.cuda_emit import emit_module
from irfuse.backend.compilers import compiler_for
from irfuse.diagnostics import CompileError, ExecutionError
from irfuse.dialects import kas
from irfuse.dialects.element_types import element_type
from irfuse.library.catalogue import Library
from irfuse.library.implementations import Implementation
from irfuse.library.indexexpr import DefinitionError
from irfuse.passes.fuse_each import kernel_for_call
from irfuse.verification.op_evaluation import evaluate


def kernel_name(impl: Implementation) -> str:
    return f"check_{impl.op.name}_{impl.name}"


def implementations_module(impls: list[Implementation], by: int | None = None) -> ModuleOp:
    """One `fuse.kernel` per implementation, each running its op once per element."""
    kernels = []
    for impl in impls:
        op = impl.op
        block = Block(arg_types=op.operand_types)
        for arg, name in zip(block.args, op.operand_names):
            arg.name_hint = name
        call = kas.CallOp(op.name, list(block.args), op.result_type)
        call.res.name_hint = "result"
        kernels.append(kernel_for_call(call, kernel_name(impl), impl, by))
    return ModuleOp(kernels)


def _shared(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An array in anonymous shared memory: a forked child's writes to it reach the parent."""
    nbytes = max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype, count=int(np.prod(shape))).reshape(shape)


def _quietly(launch) -> None:
    faulthandler.disable()  # a crash is reported by its exit status, not by a dump of this process
    launch()


def _launch_isolated(launch, timeout: float) -> str | None:
    """Runs `launch()` in a forked child: None when it finished, else how it failed. A
    hand-written kernel may loop forever or write out of bounds; either must end in a
    refusal, not in a hang or in the death of this process."""
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_quietly, args=(launch,), daemon=True)
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return f"does not finish within {timeout:g} s"
    if child.exitcode != 0:
        code = child.exitcode
        what = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return f"crashes when it runs ({what}: it reads or writes out of bounds?)"
    return None


def run_on_cpu(impls: list[Implementation], n: int, dtype=np.float64, seed: int = 0,
               by: int | None = None, isolate: float | None = None,
               library: Library | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """kernel name -> (result of the generated code, reference), on random operands. With
    `isolate` (seconds), each kernel runs in a child process with that time limit, and a
    failure raises `ExecutionError` saying how it failed."""
    element = element_type("f64" if np.dtype(dtype) == np.float64 else "f32")
    module = implementations_module(impls, by)
    emitted = emit_module(module, element, library=library)
    host = compiler_for("cpu").compile(emitted.source, emitted.kernels, element)
    rng = np.random.default_rng(seed)
    out = {}
    for impl in impls:
        op = impl.op
        args = [rng.uniform(-1, 1, size=(n, *t.shape)).astype(dtype) for t in op.operand_types]
        shape = (n, *op.result_type.shape)
        result = _shared(shape, dtype) if isolate else np.empty(shape, dtype=dtype)
        result.fill(np.nan)
        launch = functools.partial(host.launch, kernel_name(impl), [*args, result], n)
        if isolate:
            failure = _launch_isolated(launch, isolate)
            if failure:
                raise ExecutionError(failure)
        else:
            launch()
        out[kernel_name(impl)] = (np.array(result), evaluate(op, *[a.astype(np.float64) for a in args]))
    return out


CHECK_TIME_LIMIT = 20.0  # seconds an implementation may run on its check's few elements

_GCC_ERROR = re.compile(r"kernels\.cu:(\d+):(\d+): error: (.*)")
_PLACEHOLDER = re.compile(r"\b(?:FUNC|APIN\d+|APOUT|BX)\b")


def _not_compiling(impl: Implementation, what: str, e: CompileError) -> DefinitionError:
    """The compiler's refusal of a hand-written implementation, at the line of the source the
    user gave when the first error falls in it (`user_line`: that line's text, which the
    library loader finds in the user's file), else with the compiler's whole report."""
    generated = getattr(e, "generated", None)
    source = getattr(impl, "source", None)
    if generated and source:
        text, log = generated
        m = _GCC_ERROR.search(log)
        lines = text.splitlines()
        if m and 0 < int(m.group(1)) <= len(lines):
            bad = lines[int(m.group(1)) - 1]
            for mine in source.splitlines():
                pattern = ".*?".join(re.escape(part) for part in _PLACEHOLDER.split(mine.strip()))
                if mine.strip() and re.fullmatch(pattern, bad.strip()):
                    err = DefinitionError(f"{what} does not compile: {m.group(3)}")
                    err.user_line = mine  # type: ignore[attr-defined]
                    return err
    return DefinitionError(f"{what} does not compile:\n{e}")


def check_implementation(impl: Implementation, library=None) -> None:
    """Raises `DefinitionError` unless `impl` matches the reference in float64 and float32
    (with a partial block), running in a child process with a time limit."""
    n = 2 * impl.recommended_by + 3
    what = f"implementation '{impl.name}' of '{impl.op.name}'"
    for dtype, rtol, atol in ((np.float64, 1e-9, 1e-12), (np.float32, 1e-4, 1e-5)):
        try:
            (got, want), = run_on_cpu([impl], n, dtype=dtype, isolate=CHECK_TIME_LIMIT, library=library).values()
        except CompileError as e:
            raise _not_compiling(impl, what, e) from None
        except ExecutionError as e:
            raise DefinitionError(f"{what} {e.diagnostics[0].message}") from None
        scale = np.max(np.abs(want), initial=0.0, where=np.isfinite(want))
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise DefinitionError(
                f"{what} disagrees with the definition '{impl.op.definition}' in "
                f"{np.dtype(dtype).name}: element {idx[0]}, entry {list(idx[1:])}: got {got[idx]!r}, "
                f"expected {want[idx]!r} ({int(bad.sum())} of {bad.size} values differ)")
