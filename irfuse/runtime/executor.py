"""Executes a plan's host program (`irfuse.artifact.host_plan`: launches, combines, literals,
loops) on a device: the CPU or a GPU.

Every value of the host program gets its own buffer: a batch of values, one value
(uniform values: literals, uniform inputs and results, a kernel run `once`), or a
reduction's per-block partials, which a combine step combines (or, on the GPU where the
kernel can and the recording runs that combine too, the reducing kernel's last block:
`KernelInfo.finish_parts`, the combine step then left out).  At the end of a
loop iteration a value the body's kernels made and yields trades buffers with
the carried value it becomes (ping-pong); other yielded values (outer ones,
carried values, inner loops' results) are copied into the carried value's
buffer. Either way a kernel never writes a buffer that a later kernel of the
same iteration still reads under another name.

The host program is walked once into a flat list of calls (launches with their
arguments bound, copies; loops unrolled, their trip counts being constants), which
the device turns into one call (on the GPU a CUDA graph) that every run replays:
timed runs pay no interpretation of the plan, and on the GPU one launch for the lot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import field

import numpy as np

from irfuse.artifact.arrays import batch_shape
from irfuse.artifact.artifact import Artifact
from irfuse.artifact.host_plan import (NODAL, PARTIALS, UNIFORM, BatchPass, Combine, Constant, Launch, Loop,
                                       NodeLaunch, Scatter, walk_steps)
from irfuse.artifact.records import record
from irfuse.diagnostics import UsageError
from irfuse.runtime.cpu_device import CpuDevice, WallTimer  # noqa: F401 (WallTimer: for its users)
from irfuse.runtime.device import Device, in_order


def open_device(backend: str, plan: Artifact) -> Device:
    """The device of a backend ('cuda' or 'cpu') with the artifact's binary for it loaded."""
    if backend == "cuda":
        from irfuse.runtime.cuda_device import CudaDevice  # (PyCUDA's side: not for a CPU program)

        return CudaDevice(plan)
    return CpuDevice(plan)


@record
class RunResult:
    outputs: dict[str, np.ndarray]
    times_s: list[float]

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s)) if self.times_s else float("nan")


class Executor:
    def __init__(self, plan: Artifact, device: Device):
        self.plan = plan
        self.device = device
        self.host = plan.host
        self.layout = plan.layout  # every buffer, the inputs given included, is in it
        self.infos = {k.name: k for k in plan.kernels}
        self.nodes = 0  # of the mesh the run being recorded reads and writes (nodal values)
        self.inverses: dict[int, tuple] = {}  # connectivity value -> its scatter order's buffers (ScatterInverse)
        # a scatter's rows value -> its scatter step (an element kernel that writes such rows
        # sums them in the step's connectivity's groups)
        scatters = [step for step, _ in walk_steps(self.host.steps) if isinstance(step, Scatter)]
        self.scatter_of = {step.values: step for step in scatters}
        # rows one scatter adds: an element kernel adds only those into the nodes itself under
        # atomics (rows scattered twice through one connectivity are summed in its groups too,
        # but the kernel has one array of sums per output: those it writes, for the scatters)
        self.scattered_once = {v for v in self.scatter_of if sum(s.values == v for s in scatters) == 1}
        # the rows values that their kernel sums in groups as it writes them
        self.summed_rows = {r for step, _ in walk_steps(self.host.steps) if isinstance(step, Launch)
                            for r, k in zip(step.results, self.infos[step.kernel].grouped) if k}
        # scatters' results a node launch adds itself (`NodeLaunch.sums`): no scatter kernel for them
        self.summed_by_nodes = self.host.summed_in_node_launches()
        self.atomic = False  # scatters of the run being recorded add with atomics (scatter="atomic")
        self.onto = False  # ... onto the sums in their outputs (a chunk of elements after the first)

    def _shape(self, v: int, n: int) -> tuple[int, ...]:
        value = self.host.values[v]
        if value.extent == UNIFORM:
            return value.shape
        if value.extent == PARTIALS:
            return (value.words * self.infos[value.kernel].blocks(n),)
        if value.extent == NODAL:
            return batch_shape(self.layout, value.shape, self.nodes)
        return batch_shape(self.layout, value.shape, n)

    def _record(self, steps_in: tuple, env: dict, n: int, steps: list[Callable[[], None]],
                only: set | None = None) -> None:
        """Appends the calls of `steps_in` (those whose indices are in `only`, when given) to
        `steps`."""
        dev = self.device
        # The combines these steps run, by the partials they read: a launch whose kernel can
        # combine its partials in its last block does so where this recording runs the combines too.
        combines = {step.partials: step for index, step in enumerate(steps_in)
                    if isinstance(step, Combine) and (only is None or index in only)}
        finished: set[int] = set()  # partials combined by their launch's last block
        for index, step in enumerate(steps_in):
            if only is not None and index not in only:
                continue
            if isinstance(step, NodeLaunch):
                # (each sum the kernel adds itself: the group partials and the scatter order)
                args = [part for k, a in enumerate(step.args)
                        for part in (env[("scatter order", a)] if k in step.sums else (env[a],))]
                steps.append(dev.launcher(step.kernel, args + self._results(step, env, n), self.nodes))
            elif isinstance(step, Launch):
                outs = self._results(step, env, n)
                info = self.infos[step.kernel]
                if info.finish_parts and dev.finishes_in_kernel:
                    outs += self._finish_args(step, info, combines, env, n, finished)
                outs += self._group_args(step, info, env, n, steps)
                steps.append(dev.launcher(step.kernel, [env[a] for a in step.args] + outs, 1 if info.once else n))
            elif isinstance(step, Combine):
                if step.partials in finished:
                    continue
                if step.result not in env:
                    env[step.result] = dev.alloc(self._shape(step.result, n))
                parts = self.infos[self.host.values[step.partials].kernel].blocks(n)
                steps.append(dev.launcher(step.kernel, [env[step.partials], env[step.result]], parts))
            elif isinstance(step, Scatter):
                if step.result in self.summed_by_nodes and (self.atomic or self.onto):
                    raise UsageError(f"program {self.host.name}: its statements after a scatter run in the kernel "
                                     "that adds each node's partials, in one piece and in the scatter's order")
                if step.result not in env and step.result not in self.summed_by_nodes:
                    env[step.result] = dev.alloc(self._shape(step.result, n))
                if self.atomic:
                    if ("added in kernel", step.values) in env:
                        continue  # (its launch added the rows into the nodes: `_group_args`)
                    zero, add = step.atomic
                    rows = n * self.host.values[step.index].shape[0]
                    if not self.onto:
                        steps.append(dev.launcher(zero, [env[step.result]], self.nodes))
                    steps.append(dev.launcher(add, [env[step.values], env[step.index], env[step.result]], rows))
                    continue
                starts, partials, members, firsts, bases = self.inverses[step.index]
                summed = env[step.values]  # the partials of the connectivity's groups
                if step.values not in self.summed_rows:  # rows as they are: summed first
                    key = ("group partials", step.values)
                    if key not in env:
                        env[key] = dev.alloc(self._shape(step.values, n))
                    summed = env[key]
                    rows = n * self.host.values[step.index].shape[0]
                    steps.append(dev.launcher(step.groups, [env[step.values], members, firsts, bases, summed], rows))
                if step.result in self.summed_by_nodes:  # (the node launch adds them)
                    env[("scatter order", step.result)] = (summed, starts, partials)
                    continue
                steps.append(dev.launcher(step.onto if self.onto else step.kernel,
                                          [summed, starts, partials, env[step.result]], self.nodes))
            elif isinstance(step, Constant):
                if step.result not in env:  # (a loop from the host records its body once per iteration)
                    env[step.result] = dev.upload(np.array(step.table).reshape(self.host.values[step.result].shape)
                                                  if step.table else np.array(step.number))
            elif isinstance(step, Loop):
                for a, init in zip(step.args, step.inits):
                    if a not in env:
                        env[a] = dev.alloc(self._shape(a, n))
                    steps.append(functools.partial(dev.copy, env[a], env[init]))
                for it in range(step.trip):
                    self._record(step.body, env, n, steps)
                    last = [env[y] for y in step.yielded]
                    if it + 1 < step.trip:
                        for a, y, buf, swap in zip(step.args, step.yielded, last, step.swappable):
                            if swap:
                                # Ping-pong: the next iteration reads `a` where this one wrote
                                # `y`, and writes `y` over the old `a`, which nothing reads any
                                # more: no copy.
                                env[a], env[y] = env[y], env[a]
                            else:
                                steps.append(functools.partial(dev.copy, env[a], buf))
                    else:
                        for r, buf in zip(step.results, last):
                            env[r] = buf
            else:
                raise UsageError(f"the executor cannot run a {type(step).__name__} step")

    def _results(self, step: Launch, env: dict, n: int) -> list:
        """A launch's result buffers, allocated where no earlier step or `out=` gave them."""
        for r in step.results:
            if r not in env:
                env[r] = self.device.alloc(self._shape(r, n))
        return [env[r] for r in step.results]

    def _group_args(self, step: Launch, info, env: dict, n: int, steps: list) -> list:
        """The arguments after everything else of a kernel whose outputs include a scatter's
        rows (`KernelInfo.grouped`): per such output, the members, firsts and group bases of
        the connectivity its scatter adds through, which make the kernel sum its groups' rows
        into partials, then null sums and connectivity. Under atomics the members are null:
        on a device that adds in the kernel (`atomics_in_kernel`: the GPU) the sums and the
        connectivity are given, the sums set to 0 first (a chunk after the first goes on from
        the sums so far) and the scatter step runs nothing; else null too (the kernel writes
        every row, which the atomic scatter kernel then adds)."""
        out: list = []
        for r, k in zip(step.results, info.grouped):
            if not k:
                continue
            scatter = self.scatter_of.get(r)
            if self.atomic and r in self.scattered_once and self.device.atomics_in_kernel:
                if scatter.result not in env:
                    env[scatter.result] = self.device.alloc(self._shape(scatter.result, n))
                if not self.onto:
                    steps.append(self.device.launcher(scatter.atomic[0], [env[scatter.result]], self.nodes))
                env[("added in kernel", r)] = True
                out += [0, 0, 0, env[scatter.result], env[scatter.index]]
                continue
            inverse = None if self.atomic or scatter is None else self.inverses.get(scatter.index)
            out += [0, 0, 0, 0, 0] if inverse is None else [*inverse[2:5], 0, 0]
        return out

    def _finish_args(self, step: Launch, info, combines: dict, env: dict, n: int, finished: set) -> list:
        """The arguments after a launch's outputs of a kernel that can combine its reductions'
        partials in its last block (`KernelInfo.finish_parts`): each combine's result and a
        counter of finished blocks (zero, one per kernel of a recording: its launches run one
        after another), where every combine of its partials runs here and the launch's blocks
        are few enough; else null pointers (the combine kernels run)."""
        partials = [r for r, kind in zip(step.results, info.reduced) if kind]
        mine = [combines.get(p) for p in partials]
        if any(c is None for c in mine) or not info.finishes_in_last_block(n):
            return [0] * (len(partials) + 1)
        out = []
        for c in mine:
            if c.result not in env:
                env[c.result] = self.device.alloc(self._shape(c.result, n))
            out.append(env[c.result])
            finished.add(c.partials)
        key = ("finished blocks", step.kernel)
        if key not in env:
            env[key] = self.device.upload(np.zeros(1))
        return out + [env[key]]

    def prepare(self, inputs: dict[str, np.ndarray], n: int, uploaded: dict | None = None,
                outputs: dict | None = None, as_graph: bool = True, part: BatchPass | None = None,
                bound: dict | None = None, nodes: int = 0, inverses: dict | None = None,
                scatter: str = "ordered", onto: bool = False) -> "Recorded":
        """Uploads the inputs (or takes buffers already on the device from `uploaded`, which
        kernels only read) and records the host program into steps, ready to replay.
        `outputs` (name -> buffer; some outputs or all) are where the results go: the kernels that make them write
        there directly when they can (a result made by a top-level launch or combine), else a
        copy does. `as_graph=False` replays the steps one by one (buffers that are `Slot`s
        change between replays, which a captured graph would not see). `part` records one
        pass over the batch (`HostPlan.passes`): its steps, giving its outputs; `bound`
        (value -> buffer) gives values made before it (combined reductions) and the buffers
        its partials go to. A program over a mesh takes `nodes` (its nodal values' count) and,
        per connectivity input its scatters read, its scatter order (`inverses`: name -> its
        `irfuse.mesh.inverse_connectivity`, as NumPy arrays or buffers on this device in that
        order; made here from the input when absent).
        `scatter="atomic"` runs its scatters with atomics instead (no inverse; the order of the
        additions, hence the bits, change from run to run on the GPU). `onto`: the scatters add
        onto what their outputs (given in `outputs`) hold, as a chunk after the first does."""
        if n < 1:
            raise UsageError(f"the batch size must be at least 1, got {n}")
        env: dict = dict(bound or {})
        for name, v in self.host.inputs:
            if uploaded is not None:
                env[v] = uploaded[name]
            elif self.host.values[v].integer:
                env[v] = self.device.upload_integers(np.ascontiguousarray(inputs[name], dtype=np.int32))
            else:
                env[v] = self.device.upload(inputs[name])
        if scatter not in ("ordered", "atomic"):
            raise UsageError(f"scatter= is 'ordered' or 'atomic', not {scatter!r}")
        self.atomic, self.onto = scatter == "atomic", onto
        self._bind_mesh(inputs, nodes, inverses)
        given = [(name, v) for name, v in self.host.outputs if part is None or name in part.outputs]
        if outputs:
            made = self.host.made_at_top_level()
            for name, v in given:
                if v in made and v not in env and name in outputs:
                    env[v] = outputs[name]
        steps: list[Callable[[], None]] = []
        self._record(self.host.steps, env, n, steps, None if part is None else set(part.steps))
        outs = [env[v] for _, v in given]
        if outputs:
            for k, (name, _) in enumerate(given):
                if name in outputs and outs[k] is not outputs[name]:
                    steps.append(functools.partial(self.device.copy, outputs[name], outs[k]))
                    outs[k] = outputs[name]
        shapes = [self._shape(v, n) for _, v in given]
        replay = self.device.batch(steps) if as_graph else in_order(steps)
        return Recorded(self.device, replay, dict(zip([name for name, _ in given], zip(outs, shapes))), steps)

    def _bind_mesh(self, inputs: dict, nodes: int, inverses: dict | None) -> None:
        """The node count and the scatter order of each connectivity a scatter reads, on the device."""
        from irfuse.mesh.scatter import ScatterInverse, inverse_connectivity  # (meshes only)

        self.nodes = nodes
        self.inverses = {}
        names = dict((v, name) for name, v in self.host.inputs)
        for step in self.host.steps:
            if not isinstance(step, Scatter) or step.index in self.inverses or self.atomic:
                continue
            name = names[step.index]
            given = (inverses or {}).get(name)
            if given is not None and not isinstance(given, ScatterInverse):
                self.inverses[step.index] = tuple(given)  # already on the device (`Connectivity.on_device`)
                continue
            inverse = given if given is not None else inverse_connectivity(inputs[name], nodes)
            if len(inverse.members) >= 2**31:
                raise UsageError(f"connectivity '{name}' has {len(inverse.members)} entries; a scatter takes fewer "
                                 "than 2^31")
            slot = inverse.members.dtype  # (one byte a slot number, two past 256 slots a group: `slot_dtype`)
            self.inverses[step.index] = tuple(self.device.upload_integers(np.asarray(a, dtype=t)) for a, t in
                                              zip(inverse, (np.int64, np.int32, slot, slot, np.int32)))

    def run(self, inputs: dict[str, np.ndarray], n: int, repeat: int = 0, warmup: int = 1,
            back_to_back: int = 1, uploaded: dict | None = None, nodes: int = 0,
            inverses: dict | None = None, scatter: str = "ordered") -> RunResult:
        """Runs once for the results; with `repeat`, also times `repeat` runs after `warmup`.
        With `back_to_back` > 1, each timing covers that many runs issued one after another
        (launch latency overlaps the previous run) and is divided by it."""
        rec = self.prepare(inputs, n, uploaded, nodes=nodes, inverses=inverses, scatter=scatter)
        rec.replay()
        results = rec.outputs()
        times = []
        if repeat:
            for _ in range(warmup):
                rec.replay()
            times = [rec.time_once(back_to_back) for _ in range(repeat)]
        return RunResult(results, times)


@record
class Recorded:
    """A host program recorded on a device with its buffers bound: replaying it runs the plan."""
    device: Device
    replay: Callable[[], None]  # the recorded steps as one call (Device.batch)
    results: dict[str, tuple]  # output name -> (buffer, shape)
    steps: list = field(default_factory=list)  # the recorded calls one by one (what a profile times)

    def outputs(self) -> dict[str, np.ndarray]:
        self.device.synchronize()
        return {name: self.device.download(buf, shape) for name, (buf, shape) in self.results.items()}

    def time_once(self, back_to_back: int = 1) -> float:
        """Seconds per run of one timing over `back_to_back` runs issued one after another."""
        with self.device.timer() as t:
            for _ in range(back_to_back):
                self.replay()
        return t.seconds / back_to_back
