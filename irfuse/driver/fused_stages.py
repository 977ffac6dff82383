"""An elements stage and the nodes stage after it run as one: the statements per node after a
scatter run in the kernel that adds each node's partials.

A program over a mesh with nodal statements runs as passes (`transforms.node_phases`): the
elements (gathers, element code, scatters), then the nodes (statements on the scatters'
sums). Run one by one, a scatter's kernel writes each node's sum and the node pass's kernel
reads it back. Where the pass over the nodes is one kernel of one thread a node that reads a
sum no later pass reads and the program does not return, that kernel is also emitted with the
sum's load made by adding the node's partials itself (`backend.cuda_emit.emit_sums_kernel`),
into the elements stage's module (its launch interface beside the stage's own kernels), and
the two stages' host plans become one (`fused_plan`): the elements stage's steps, its scatter
run by no kernel of its own, then the node kernel launched over the nodes
(`host_plan.NodeLaunch`). The sums stay on chip, and a launch and a pass over the sums are
saved. The fused plan runs in one piece in the scatter's order; a call that runs in chunks or
with atomics runs the stages one by one (`api.staged_programs`), with the same bits: the
node kernel adds the partials as the scatter kernel does.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from irfuse.artifact import host_plan as hp
from irfuse.artifact.records import record
from irfuse.backend.cuda_emit import kernels_of
from irfuse.dialects import fuse
from irfuse.driver.host_lowering import lower_host_program

SUMS_SUFFIX = "__sums"  # the node kernel emitted to add a scatter's sums: its name's end


@record(frozen=True)
class SumsFusion:
    """The nodes stage after an elements stage run by it: its one kernel `kernel` (`sums`: the
    inputs it reads as the scatter's sums, by position), the values those are (`read`: by
    name)."""

    kernel: fuse.KernelOp
    sums: tuple[int, ...]
    read: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.kernel.sym_name.data + SUMS_SUFFIX


def sums_fusions(overs: list[str], inputs: list[tuple[str, ...]], lowered: list[ModuleOp],
                 program_outputs: tuple[str, ...]) -> dict[int, SumsFusion]:
    """The fusions the stages allow, by the elements stage's index (see the module): stage k
    over the elements, k + 1 over the nodes, whose host program is one launch of one kernel
    whose threads run their own elements (nodes: one thread's row each, `bx` 1) that reads by
    plain loads the scatters' sums stage k gives for it alone."""
    found: dict[int, SumsFusion] = {}
    for k in range(len(overs) - 1):
        if (overs[k], overs[k + 1]) != ("elements", "nodes"):
            continue
        elements, nodes = lower_host_program(lowered[k]), lower_host_program(lowered[k + 1])
        kernels = kernels_of(lowered[k + 1])
        launches = [s for s in nodes.steps if isinstance(s, hp.Launch)]
        if len(kernels) != 1 or len(launches) != 1 or \
                any(not isinstance(s, (hp.Launch, hp.Constant)) for s in nodes.steps):
            continue
        kernel, launch = kernels[0], launches[0]
        if kernel.bx.data != 1 or kernel.runs_once or \
                launch.kernel != kernel.sym_name.data:
            continue
        scattered = {s.result for s in elements.steps if isinstance(s, hp.Scatter)}
        made = {name for name, v in elements.outputs if v in scattered}
        later = {name for ins in inputs[k + 2:] for name in ins}
        read = [name for name in inputs[k + 1] if name in made and name not in later and name not in program_outputs]
        node_inputs = dict(nodes.inputs)
        sums = tuple(p for p, a in enumerate(launch.args) if any(node_inputs.get(name) == a for name in read))
        if not sums or not all(_plain_loads(kernel, p) for p in sums):
            continue
        found[k] = SumsFusion(kernel, sums, tuple(name for name in read
                                                          if node_inputs[name] in {launch.args[p] for p in sums}))
    return found


def _plain_loads(kernel: fuse.KernelOp, position: int) -> bool:
    """Whether every use of the kernel's input at `position` is a load of its element's row."""
    arg = kernel.input_args[position]
    return position not in kernel.uniform_positions and all(
        isinstance(u.operation, fuse.LoadOp) and u.operation.index is None for u in arg.uses)


def fused_plan(elements: hp.HostPlan, nodes: hp.HostPlan, fusion: SumsFusion) -> hp.HostPlan:
    """The elements stage's plan with the nodes stage's run by it (see the module): the nodes
    stage's values added (its per-element values are per node), its inputs that the elements
    stage does not take added to the inputs, its launch a `NodeLaunch` of the kernel that adds
    the sums, whose scatters run no kernel of their own; the outputs those of both stages but
    the sums."""
    names = dict(elements.inputs)
    made = dict(elements.outputs)
    values = list(elements.values)
    ids: dict[int, int] = {}
    inputs = list(elements.inputs)
    for name, v in nodes.inputs:
        if name in made:  # (the sums it adds, and values such as a reduction's the stage gives)
            ids[v] = made[name]
        elif name in names:
            ids[v] = names[name]
        else:
            ids[v] = len(values)
            values.append(_per_node(nodes.values[v]))
            inputs.append((name, ids[v]))
    for v, value in enumerate(nodes.values):
        if v not in ids:
            ids[v] = len(values)
            values.append(_per_node(value))
    steps: list[hp.Step] = list(elements.steps)
    for step in nodes.steps:
        if isinstance(step, hp.Constant):
            steps.append(hp.Constant(ids[step.result], step.number, step.table))
        else:
            steps.append(hp.NodeLaunch(fusion.name, tuple(ids[a] for a in step.args),  # type: ignore[union-attr]
                                       tuple(ids[r] for r in step.results), fusion.sums))  # type: ignore[union-attr]
    outputs = [(name, v) for name, v in elements.outputs if name not in fusion.read]
    outputs += [(name, ids[v]) for name, v in nodes.outputs]
    return hp.HostPlan(tuple(values), tuple(inputs), tuple(outputs), tuple(steps), elements.passes, elements.align,
                       elements.name)


def _per_node(value: hp.Value) -> hp.Value:
    """A value of the nodes stage in the fused plan: one per node where it was one per element."""
    return hp.Value(value.shape, hp.NODAL if value.extent == hp.ELEMENT else value.extent, value.kernel,
                    value.integer)
