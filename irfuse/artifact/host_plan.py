"""The host program as plain steps: what runs the kernels, in which order, on which buffers.

The driver lowers a plan's host program (the `kas.program` of `fuse.launch`, `fuse.combine`,
`kas.constant` and `kas.loop` ops) once into a `HostPlan` saved with the plan; the runtime
replays it and never reads IR. Every value of the host program is a `Value`, named by its
index, holding one value per element (`ELEMENT`), one for the whole batch (`UNIFORM`: a
literal, a uniform input, a kernel run once, a combined reduction) or a reduction's per-block
partials (`PARTIALS`, as many as its kernel has blocks), or one per node of a mesh (`NODAL`:
nodal inputs, scatters' results; a connectivity is a per-element value of `integer` node
numbers). A step launches a kernel (`Launch`), combines partials (`Combine`), adds
per-element rows into a nodal value (`Scatter`), makes a literal (`Constant`) or repeats a body
(`Loop`, run from the host: each iteration's yielded values become the next one's carried
values, trading buffers where a value made in the body is yielded once).

`passes` are the passes over the batch a run in chunks takes (`analysis.batch_passes`): the
top-level steps each pass runs on every chunk, the inputs it reads and outputs it gives, the
partials its chunks give and the combines run once after it over the whole batch's; chunks
hold a multiple of `align` elements when the batch takes several.
"""

from __future__ import annotations

import math
from typing import Union

from irfuse.artifact.records import record

ELEMENT, UNIFORM, PARTIALS, NODAL = "element", "uniform", "partials", "nodal"
# Loop iterations in all, nested loops multiplied (the dialects' loops are held to it too): a
# loop run from the host records its body once per iteration, and nothing over this would
# finish in any reasonable time.
MAX_TOTAL_ITERATIONS = 1_000_000
EXTENTS = (ELEMENT, UNIFORM, PARTIALS, NODAL)


@record(frozen=True)
class Value:
    shape: tuple[int, ...]  # of one value
    extent: str  # ELEMENT, UNIFORM or PARTIALS
    kernel: str = ""  # PARTIALS: the kernel whose blocks make them
    integer: bool = False  # a connectivity: 32-bit node numbers, not words of the element type

    @property
    def words(self) -> int:
        return math.prod(self.shape)


@record(frozen=True)
class Launch:
    kernel: str
    args: tuple[int, ...]
    results: tuple[int, ...]


@record(frozen=True)
class NodeLaunch(Launch):
    """A launch over the nodes of the mesh (one element of the kernel a node), after the
    element kernels: statements run per node after a scatter, in the kernel that adds each
    node's partials (`backend.cuda_emit.emit_sums_kernel`). The args at positions `sums` are
    the results of `Scatter` steps, which the kernel adds itself: the runtime passes it each
    one's group partials and its connectivity's scatter order instead, and runs no scatter
    kernel for them. Such a plan runs in one piece and in the scatter's order."""
    sums: tuple[int, ...] = ()


@record(frozen=True)
class Combine:
    kernel: str  # the combine kernel
    partials: int
    result: int


@record(frozen=True)
class Scatter:
    """A nodal value made from per-element rows (`values`, K rows an element) through a
    connectivity (`index`): each node's rows added in ascending (element, position) order, by
    `kernel` over the connectivity's inverse (which the runtime makes from the index input).
    A chunk of elements after the first runs `onto` (each node's sum going on from the chunks
    before). The rows are added in groups of elements (`scatter_groups`): the kernel that
    writes them sums each group's into partials, which `kernel` adds; rows that no kernel
    summed so are summed by `groups` first. A call that asks for atomics runs `atomic` = (kernel setting the nodes to 0,
    kernel adding each row into its node) instead."""
    kernel: str
    values: int
    index: int
    result: int
    atomic: tuple[str, str] = ("", "")
    onto: str = ""
    # the kernel summing the rows into their groups' partials where no launch did (rows of an
    # input: see `KernelInfo.grouped`)
    groups: str = ""


@record(frozen=True)
class Constant:
    result: int
    number: float
    table: tuple[float, ...] = ()  # a `kas.table`'s numbers (`number` then unused), in word order


@record(frozen=True)
class Loop:
    trip: int
    args: tuple[int, ...]  # the body's carried values
    inits: tuple[int, ...]  # what each starts from
    body: tuple["Step", ...]
    yielded: tuple[int, ...]  # the body's values: the carried ones' next values, then the results'
    results: tuple[int, ...]
    swappable: tuple[bool, ...]  # per yielded value: made by the body's own launch and yielded once


Step = Union[Launch, NodeLaunch, Combine, Constant, Loop, Scatter]


def walk_steps(steps: tuple, runs: int = 1):
    """(step, times it runs a run of the plan) of every step, loops' bodies included after
    their loop (a body's steps run the loop's trip count times more)."""
    for step in steps:
        yield step, runs
        if isinstance(step, Loop):
            yield from walk_steps(step.body, runs * step.trip)


@record(frozen=True)
class BatchPass:
    steps: tuple[int, ...]  # indices of the top-level steps it runs, in order
    reads: tuple[str, ...]  # the program inputs they read
    outputs: tuple[str, ...]  # the program outputs it gives
    partials: tuple[int, ...]  # the partials its chunks give
    combines: tuple[int, ...]  # indices of the top-level `Combine` steps run after it


@record(frozen=True, eq=False)  # (compared and hashed by identity: plans are large)
class HostPlan:
    values: tuple[Value, ...]
    inputs: tuple[tuple[str, int], ...]  # (name, value) in the program's `input` order
    outputs: tuple[tuple[str, int], ...]  # (name, value) in its `return` order
    steps: tuple[Step, ...]
    passes: tuple[BatchPass, ...]
    align: int = 1
    name: str = ""  # the program's

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each input's and output's value shape, by name."""
        return {name: self.values[v].shape for name, v in (*self.inputs, *self.outputs)}

    def nodal_names(self) -> frozenset[str]:
        """The inputs and outputs that hold one value per node of a mesh."""
        return frozenset(name for name, v in (*self.inputs, *self.outputs) if self.values[v].extent == NODAL)

    def index_names(self) -> frozenset[str]:
        """The inputs that are connectivities (K node numbers per element)."""
        return frozenset(name for name, v in self.inputs if self.values[v].integer)

    def uniform_names(self) -> frozenset[str]:
        """The inputs and outputs that hold one value for the whole batch (no batch axis)."""
        return frozenset(name for name, v in (*self.inputs, *self.outputs) if self.values[v].extent == UNIFORM)

    def made_at_top_level(self) -> set[int]:
        """Values a top-level `Launch`, `Combine` or `Scatter` makes (an output there can be written
        straight into the caller's buffer)."""
        out: set[int] = set()
        for step in self.steps:
            if isinstance(step, Launch):
                out.update(step.results)
            elif isinstance(step, (Combine, Scatter)):
                out.add(step.result)
        return out

    def summed_in_node_launches(self) -> set[int]:
        """The results of `Scatter` steps that a `NodeLaunch` adds itself (its `sums`): no
        scatter kernel runs for them."""
        return {step.args[k] for step, _ in walk_steps(self.steps) if isinstance(step, NodeLaunch) for k in step.sums}

    def launches(self) -> list[Launch]:
        """Every `Launch`, those of loop bodies included."""
        out: list[Launch] = []

        def walk(steps) -> None:
            for s in steps:
                if isinstance(s, Launch):
                    out.append(s)
                elif isinstance(s, Loop):
                    walk(s.body)
        walk(self.steps)
        return out

    def combines(self) -> list[Combine]:
        """The combines the passes run, in order."""
        return [self.steps[i] for p in self.passes for i in p.combines]  # type: ignore[misc]

    # --- JSON --------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"values": [{"shape": list(v.shape), "extent": v.extent, **({"kernel": v.kernel} if v.kernel else {}),
                            **({"integer": True} if v.integer else {})}
                           for v in self.values],
                "inputs": [list(p) for p in self.inputs], "outputs": [list(p) for p in self.outputs],
                "steps": [_step_json(s) for s in self.steps],
                "passes": [{"steps": list(p.steps), "reads": list(p.reads), "outputs": list(p.outputs),
                            "partials": list(p.partials), "combines": list(p.combines)} for p in self.passes],
                "align": self.align, "name": self.name}

    @staticmethod
    def from_json(d: dict) -> "HostPlan":
        """The plan `to_json` wrote; ValueError (or KeyError, TypeError) on anything else."""
        values = tuple(Value(tuple(int(x) for x in v["shape"]), _extent(v["extent"]), str(v.get("kernel", "")),
                             bool(v.get("integer", False)))
                       for v in d["values"])
        count = len(values)

        def value(i) -> int:
            if not isinstance(i, int) or not 0 <= i < count:
                raise ValueError(f"host plan: value {i!r} is not one of its {count} values")
            return i
        steps = tuple(_step_from_json(s, value, 1) for s in d["steps"])
        passes = tuple(BatchPass(tuple(int(i) for i in p["steps"]), tuple(map(str, p["reads"])),
                                 tuple(map(str, p["outputs"])), tuple(value(i) for i in p["partials"]),
                                 tuple(int(i) for i in p["combines"])) for p in d["passes"])
        for p in passes:
            if any(not 0 <= i < len(steps) for i in (*p.steps, *p.combines)) or \
                    not all(isinstance(steps[i], Combine) for i in p.combines):
                raise ValueError("host plan: a pass names steps it does not have")
        return HostPlan(values, tuple((str(n), value(v)) for n, v in d["inputs"]),
                        tuple((str(n), value(v)) for n, v in d["outputs"]), steps, passes, int(d["align"]),
                        str(d.get("name", "")))


def _extent(e) -> str:
    if e not in EXTENTS:
        raise ValueError(f"host plan: extent {e!r} is not one of {', '.join(EXTENTS)}")
    return e


def _step_json(s: Step) -> dict:
    if isinstance(s, NodeLaunch):
        return {"node_launch": s.kernel, "args": list(s.args), "results": list(s.results), "sums": list(s.sums)}
    if isinstance(s, Launch):
        return {"launch": s.kernel, "args": list(s.args), "results": list(s.results)}
    if isinstance(s, Combine):
        return {"combine": s.kernel, "partials": s.partials, "result": s.result}
    if isinstance(s, Constant):
        return {"table": [v.hex() for v in s.table], "result": s.result} if s.table else \
            {"constant": s.number, "result": s.result}
    if isinstance(s, Scatter):
        return {"scatter": s.kernel, "values": s.values, "index": s.index, "result": s.result,
                "atomic": list(s.atomic), "onto": s.onto, "groups": s.groups}
    return {"loop": s.trip, "args": list(s.args), "inits": list(s.inits), "body": [_step_json(b) for b in s.body],
            "yielded": list(s.yielded), "results": list(s.results), "swappable": list(s.swappable)}


def _step_from_json(d: dict, value, enclosing: int) -> Step:
    if "node_launch" in d:
        args = tuple(value(i) for i in d["args"])
        sums = tuple(int(k) for k in d["sums"])
        if any(not 0 <= k < len(args) for k in sums):
            raise ValueError("host plan: a node launch sums arguments it does not have")
        return NodeLaunch(str(d["node_launch"]), args, tuple(value(i) for i in d["results"]), sums)
    if "launch" in d:
        return Launch(str(d["launch"]), tuple(value(i) for i in d["args"]), tuple(value(i) for i in d["results"]))
    if "combine" in d:
        return Combine(str(d["combine"]), value(d["partials"]), value(d["result"]))
    if "constant" in d:
        return Constant(value(d["result"]), float(d["constant"]))
    if "table" in d:
        return Constant(value(d["result"]), 0.0, tuple(float.fromhex(str(v)) for v in d["table"]))
    if "scatter" in d:
        zero, add = (str(k) for k in d["atomic"])
        return Scatter(str(d["scatter"]), value(d["values"]), value(d["index"]), value(d["result"]), (zero, add),
                       str(d["onto"]), str(d["groups"]))
    if "loop" in d:
        trip = int(d["loop"])
        if not 1 <= trip * enclosing <= MAX_TOTAL_ITERATIONS:
            raise ValueError(f"host plan: a loop of {trip} iterations ({trip * enclosing} with its enclosing loops; "
                             f"1 to {MAX_TOTAL_ITERATIONS} are allowed)")
        return Loop(trip, tuple(value(i) for i in d["args"]), tuple(value(i) for i in d["inits"]),
                    tuple(_step_from_json(b, value, trip * enclosing) for b in d["body"]),
                    tuple(value(i) for i in d["yielded"]),
                    tuple(value(i) for i in d["results"]), tuple(bool(b) for b in d["swappable"]))
    raise ValueError(f"host plan: unknown step {sorted(d)}")
