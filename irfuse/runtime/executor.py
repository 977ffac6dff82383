"""Executes a plan's host program (launches, loops) on a device: the CPU or a GPU.

Every SSA value of the host program gets its own buffer: a batch of values, one value
(uniform values: literals, uniform inputs and results, a kernel run `once`), or a
reduction's per-block partials, which a `fuse.combine` step combines.  At the end of a
loop iteration a value the body's kernels made and yields trades buffers with
the block argument it becomes (ping-pong); other yielded values (outer ones,
block arguments, inner loops' results) are copied into the block argument's
buffer. Either way a kernel never writes a buffer that a later kernel of the
same iteration still reads under another name.

The host program is walked once into a flat list of steps (launches with their
arguments bound, copies; loops unrolled, their trip counts being constants), which
the device turns into one call (on the GPU a CUDA graph) that every run replays:
timed runs pay no interpretation of the IR, and on the GPU one launch for the lot.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
import numpy as np
from xdsl.ir import SSAValue

from irfuse.analysis.batch_passes import BatchPass
from irfuse.analysis.uniformity import Extent, value_extent
from irfuse.backend.compilers import compiler_for
from irfuse.diagnostics import UsageError
from irfuse.dialects import fuse, kas
from irfuse.dialects.layouts import batch_shape
from irfuse.driver.artifact import CompiledProgram
from irfuse.runtime.cuda_device import CudaDevice
from irfuse.runtime.device import Device, Slot, in_order


def open_device(backend: str, plan: CompiledProgram) -> Device:
    """The device of a backend ('cuda' or 'cpu') with the program's kernels loaded."""
    if backend == "cuda":
        return CudaDevice(plan)
    return CpuDevice(plan)


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    times_s: list[float]

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s)) if self.times_s else float("nan")


class Executor:
    def __init__(self, plan: CompiledProgram, device: Device):
        self.plan = plan
        self.device = device
        self.program = plan.program
        self.layout = plan.layout  # every buffer, the inputs given included, is in it
        self.infos = {k.name: k for k in plan.kernels}

    def _shape(self, v: SSAValue, n: int) -> tuple[int, ...]:
        extent = value_extent(v)
        shape = tuple(v.type.shape)  # type: ignore[attr-defined]
        if extent == Extent.UNIFORM:
            return shape
        if extent == Extent.PARTIALS:
            return (v.type.size * self._blocks(v.owner, n),)  # type: ignore[attr-defined]
        return batch_shape(self.layout, shape, n)

    def _blocks(self, launch: fuse.LaunchOp, n: int) -> int:
        return self.infos[launch.kernel_name].blocks(n)

    @staticmethod
    def _swappable(y: SSAValue, loop: kas.LoopOp, yielded) -> bool:
        """Whether a yielded value's buffer may trade places with its block argument's: it is
        made by a launch of the loop's own body (not an outer value, a block argument or an
        inner loop's result, whose buffers other values share) and yielded once."""
        owner = y.owner
        return (isinstance(owner, fuse.LaunchOp) and owner.parent_block() is loop.body.block
                and sum(v is y for v in yielded) == 1)

    def _record(self, block, env: dict, n: int, steps: list[Callable[[], None]],
                only: set | None = None) -> list:
        """Appends the steps of `block` to `steps` (of its ops in `only`, when given); returns
        the buffers it returns or yields."""
        dev = self.device
        for op in block.ops:
            if only is not None and op not in only:
                continue
            if isinstance(op, fuse.LaunchOp):
                outs = []
                for r in op.res:
                    if r not in env:
                        env[r] = dev.alloc(self._shape(r, n))
                    outs.append(env[r])
                once = self.infos[op.kernel_name].once
                steps.append(dev.launcher(op.kernel_name, [env[a] for a in op.args] + outs, 1 if once else n))
            elif isinstance(op, fuse.CombineOp):
                if op.res not in env:
                    env[op.res] = dev.alloc(self._shape(op.res, n))
                parts = self._blocks(op.partials.owner, n)  # type: ignore[arg-type]
                steps.append(dev.launcher(op.kernel_name, [env[op.partials], env[op.res]], parts))
            elif isinstance(op, kas.ConstantOp):
                if op.res not in env:  # (a loop from the host records its body once per iteration)
                    env[op.res] = dev.upload(np.array(op.number))
            elif isinstance(op, kas.LoopOp):
                args = op.body.block.args
                for a, init in zip(args, op.iter_args):
                    if a not in env:
                        env[a] = dev.alloc(self._shape(a, n))
                    steps.append(functools.partial(dev.copy, env[a], env[init]))
                last: list = []
                yielded = op.body.block.last_op.operands
                for it in range(op.trip_count.data):
                    last = self._record(op.body.block, env, n, steps)
                    if it + 1 < op.trip_count.data:
                        for a, y, buf in zip(args, yielded, last):
                            if self._swappable(y, op, yielded):
                                # Ping-pong: the next iteration reads `a` where this one wrote
                                # `y`, and writes `y` over the old `a`, which nothing reads any
                                # more: no copy.
                                env[a], env[y] = env[y], env[a]
                            else:
                                steps.append(functools.partial(dev.copy, env[a], buf))
                for r, y in zip(op.res, last):
                    env[r] = y
            elif isinstance(op, (kas.ReturnOp, kas.YieldOp)):
                return [env[v] for v in op.values]
            elif isinstance(op, (kas.CallOp, kas.ReduceOp)):
                raise UsageError(f"the program still has {op.name} ops: lower it first (e.g. --pipeline fuse-each)")
            else:
                raise UsageError(f"the executor cannot run '{op.name}'")
        return []

    def prepare(self, inputs: dict[str, np.ndarray], n: int, uploaded: dict | None = None,
                outputs: dict | None = None, as_graph: bool = True, part: BatchPass | None = None,
                bound: dict | None = None) -> "Recorded":
        """Uploads the inputs (or takes buffers already on the device from `uploaded`, which
        kernels only read) and records the host program into steps, ready to replay.
        `outputs` (name -> buffer) are where the results go: the kernels that make them write
        there directly when they can (a result made by a launch of the program's body), else a
        copy does. `as_graph=False` replays the steps one by one (buffers that are `Slot`s
        change between replays, which a captured graph would not see). `part` records one
        pass over the batch (`analysis.batch_passes`): its steps, giving its outputs;
        `bound` (value -> buffer) gives values made before it (combined reductions) and
        the buffers its partials go to."""
        if n < 1:
            raise UsageError(f"the batch size must be at least 1, got {n}")
        env: dict = dict(bound or {})
        for name, arg in zip(self.program.inputs, self.program.body.block.args):
            env[arg] = uploaded[name] if uploaded is not None else self.device.upload(inputs[name])
        given = [(name, v) for name, v in zip(self.program.outputs, self.program.return_op.values)
                 if part is None or name in part.outputs]
        if outputs:
            for name, v in given:
                if isinstance(v.owner, (fuse.LaunchOp, fuse.CombineOp)) \
                        and v.owner.parent_block() is self.program.body.block and v not in env:
                    env[v] = outputs[name]
        steps: list[Callable[[], None]] = []
        self._record(self.program.body.block, env, n, steps, None if part is None else set(part.steps))
        outs = [env[v] for _, v in given]
        if outputs:
            for k, (name, _) in enumerate(given):
                if outs[k] is not outputs[name]:
                    steps.append(functools.partial(self.device.copy, outputs[name], outs[k]))
                    outs[k] = outputs[name]
        shapes = [self._shape(v, n) for _, v in given]
        replay = self.device.batch(steps) if as_graph else in_order(steps)
        return Recorded(self.device, replay, dict(zip([name for name, _ in given], zip(outs, shapes))))

    def run(self, inputs: dict[str, np.ndarray], n: int, repeat: int = 0, warmup: int = 1,
            back_to_back: int = 1, uploaded: dict | None = None) -> RunResult:
        """Runs once for the results; with `repeat`, also times `repeat` runs after `warmup`.
        With `back_to_back` > 1, each timing covers that many runs issued one after another
        (launch latency overlaps the previous run) and is divided by it."""
        rec = self.prepare(inputs, n, uploaded)
        rec.replay()
        results = rec.outputs()
        times = []
        if repeat:
            for _ in range(warmup):
                rec.replay()
            times = [rec.time_once(back_to_back) for _ in range(repeat)]
        return RunResult(results, times)


@dataclass
class Recorded:
    """A host program recorded on a device with its buffers bound: replaying it runs the plan."""
    device: Device
    replay: Callable[[], None]  # the recorded steps as one call (Device.batch)
    results: dict[str, tuple]  # output name -> (buffer, shape)

    def outputs(self) -> dict[str, np.ndarray]:
        self.device.synchronize()
        return {name: self.device.download(buf, shape) for name, (buf, shape) in self.results.items()}

    def time_once(self, back_to_back: int = 1) -> float:
        """Seconds per run of one timing over `back_to_back` runs issued one after another."""
        with self.device.timer() as t:
            for _ in range(back_to_back):
                self.replay()
        return t.seconds / back_to_back


class WallTimer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0


class CpuDevice:
    """Runs the generated CUDA C on the host (see `backend.host_compile`). With
    `reverse_threads`, every region of every block runs its threads last to first: a
    missing barrier shows in one of the two orders (see `cuda_emit`)."""

    name = "cpu"

    def __init__(self, plan: CompiledProgram, reverse_threads: bool = False):
        self.dtype = plan.element.numpy
        self.reverse_threads = reverse_threads
        self.module = compiler_for("cpu").compile(plan.source, plan.kernels, plan.element)

    def upload(self, a):
        return np.ascontiguousarray(a, dtype=self.dtype).copy()

    def download(self, buf, shape):
        return buf.reshape(shape).copy()

    def alloc(self, shape):
        # NaN-filled so an element a kernel fails to write is visible.
        return np.full(shape, np.nan, dtype=self.dtype)

    def copy(self, dst, src):
        dst = dst.array if isinstance(dst, Slot) else dst
        src = src.array if isinstance(src, Slot) else src
        np.copyto(dst, src.reshape(dst.shape))

    def write(self, buf, a):
        np.copyto(buf, a.reshape(buf.shape), casting="no")

    def read_into(self, out, buf):
        np.copyto(out, buf.reshape(out.shape), casting="no")

    def launcher(self, kernel, buffers, n):
        return self.module.launcher(kernel, buffers, n, self.reverse_threads)

    def batch(self, steps):
        return in_order(steps)

    def synchronize(self):
        pass

    def close(self):
        pass

    def timer(self):
        return WallTimer()
