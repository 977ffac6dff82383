"""fuse-partition: group the calls into kernels by the fusion search (cost model + CP-SAT cover).

Plan `plan` of the `top` best is applied: each chosen group becomes a
`fuse.kernel` with the chosen implementations and BY, in its unoptimized form
(operands loaded into shared memory, a barrier after the loads and after
every call, sequential shared offsets) so that each in-kernel pass after it
shows its effect; the kernel carries the planner's prediction as
`predicted_ns`. The host program launches the kernels in an order that
respects every dependence. A group holding a loop becomes a kernel with a
`fuse.loop` inside (the loop runs there, its body's calls with it); a loop no
chosen group holds stays a `kas.loop` on the host around its body's launches
(`loops=host` keeps every loop there).

A per-element value made before a reduction over the batch and read after it is stored by
the pass that makes it and read back, or computed again in the later pass from what it comes
from (`transforms.recompute`): `recompute=auto` plans each choice (every combination for up to
three such values, else all stored or all computed again) and applies the one of least predicted
time, stored where they tie; `never` stores, `always` computes every such value again. A kernel
that computes values again names them (`recomputed = [...]`). A run in chunks computes such
values again whatever the choice (its passes read the inputs again, `analysis.batch_passes`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.diagnostics import CompileError, Diagnostic, UsageError, print_diagnostics
from irfuse.dialects import fuse, kas
from irfuse.dialects.context import module_text
from irfuse.passes.module_element_type import itemsize_of, layout_of
from irfuse.planner.cost import DEFAULT_BATCH, load_profile
from irfuse.planner.dag import BlockDAG
from irfuse.planner.registers import load_register_table
from irfuse.planner.search import (
    DEFAULT_CONFIG_BUDGET,
    LOOP_PLACEMENTS,
    PER_THREAD_CHOICES,
    Config,
    describe_group,
    external_values,
    plan_program,
    rebind,
)
from irfuse.kernel.bridge import kernel_op
from irfuse.transforms.node_phases import refuse_nodal_statements
from irfuse.planner.finish import check_finish, mark_finish
from irfuse.transforms.recompute import RECOMPUTED, crossing_values, recompute, value_name
from irfuse.transforms.kernel_builder import build_kernel_model, erase_unread_gathers, launch_ops


class NoSuchPlan(UsageError):
    """`plan=K` asks for a plan beyond the distinct plans the search found."""

    def __init__(self, found: int, asked: int):
        super().__init__(f"fuse-partition: only {found} distinct plans exist; plan={asked} asked")
        self.found = found


def node_name(op) -> str:
    """A group member's part of its kernel's name."""
    if isinstance(op, kas.ReduceOp):
        return op.reduce_kind.value
    return getattr(op, "op_name", "loop")


def kernel_from_config(config: Config, dag: BlockDAG, name: str) -> fuse.KernelOp:
    """The unoptimized kernel of a chosen configuration (the one the planner built and costed
    before its in-kernel steps), with the prediction and the group it stands for."""
    ops = [dag.ops[i] for i in config.group]
    model = build_kernel_model(ops, config.impls, config.inputs, config.outputs, config.by,
                               itemsize=config.model.itemsize, layout=config.model.layout,
                               per_thread=config.model.per_thread)
    kernel = kernel_op(name, model, config.inputs, config.outputs)
    kernel.predicted_ns = IntAttr(int(round(config.cost.time * 1e9)))
    kernel.group = StringAttr(describe_group(ops, config.impls).replace("+", " "))
    again = sorted({value_name(op) for op in ops if RECOMPUTED in op.attributes})
    if again:
        kernel.recomputed = ArrayAttr(StringAttr(name) for name in again)
    return kernel


def _reorder_and_launch(dag: BlockDAG, chosen: list[Config], names: list[str], kernels: list[fuse.KernelOp]) -> None:
    """Replaces each group by one launch and re-sorts the block so launches follow their inputs."""
    node_of = {}
    for g, c in enumerate(chosen):
        for i in c.group:
            node_of[i] = ("k", g)
    for i, op in enumerate(dag.ops):
        node_of.setdefault(i, ("op", i))
    supers = sorted(set(node_of.values()), key=lambda s: min(i for i, v in node_of.items() if v == s))
    edges = {s: set() for s in supers}
    indeg = {s: 0 for s in supers}
    for i, succ in enumerate(dag.succ):
        for j in succ:
            a, b = node_of[i], node_of[j]
            if a != b and b not in edges[a]:
                edges[a].add(b)
                indeg[b] += 1
    first = {s: min(i for i, v in node_of.items() if v == s) for s in supers}
    ready = sorted((s for s in supers if indeg[s] == 0), key=lambda s: first[s])
    order = []
    while ready:
        s = ready.pop(0)
        order.append(s)
        for t in edges[s]:
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
                ready.sort(key=lambda s: first[s])
    if len(order) != len(supers):
        raise CompileError("fuse-partition: the chosen kernels depend on each other in a cycle")
    block = dag.block
    terminator = block.last_op
    assert terminator is not None
    renamed: dict = {}  # call results -> launch results
    for s in order:
        if s[0] == "op":
            op = dag.ops[s[1]]
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(terminator))
        else:
            c = chosen[s[1]]
            # The group's first statement locates its launch.
            ops, values = launch_ops(names[s[1]], [renamed.get(v, v) for v in c.inputs], c.outputs,
                                     dag.ops[min(c.group)].location)
            for host_op in ops:
                Rewriter.insert_op(host_op, InsertPoint.before(terminator))
            for r, v in zip(values, c.outputs):
                v.replace_all_uses_with(r)
                renamed[v] = r
    for c in chosen:
        for i in sorted(c.group, reverse=True):
            op: Operation = dag.ops[i]
            assert not any(r.uses for r in op.results)
            op.detach()
            op.erase()


_PLANS: dict[tuple, tuple] = {}  # (program text, search options) -> (dags, plans) of the last searches
MEMO_SEARCHES = 8  # (a program's variants that store or compute values again are searched in turn)
RECOMPUTE_CHOICES = ("auto", "never", "always")
MAX_COMBINED = 3  # values a later pass reads whose every combination of choices is planned


def search_plans(program: kas.ProgramOp, n: int, profile_name: str, itemsize: int, max_size: int, top: int,
                 keep: int, registers_path: str | None = None, progress=None,
                 budget: int = DEFAULT_CONFIG_BUDGET, layout: str = "aos", loops: str = "auto",
                 per_thread: str = "auto", phases: bool = True):
    """The fusion search, memoized per program and options within a process (tuning applies
    plan after plan of one search). The memo only saves time: its key holds every input of
    the search (the register table by content), so a hit gives what a search would."""
    registers = load_register_table(registers_path) if registers_path else None
    key = (module_text(program), n, profile_name, itemsize, layout, loops, per_thread, phases, max_size, top, keep,
           budget, tuple(sorted(registers.items())) if registers else None)
    if key not in _PLANS:
        if len(_PLANS) >= MEMO_SEARCHES:
            del _PLANS[next(iter(_PLANS))]  # the oldest
        profile = load_profile(profile_name)
        _PLANS[key] = (program, plan_program(program, n, profile, itemsize, max_size, top, keep,
                                             progress=progress, registers=registers, budget=budget,
                                             layout=layout, loops=loops, per_thread=per_thread, phases=phases))
    old_program, (dags, plans) = _PLANS[key]
    if old_program is not program:
        # Re-run the block analysis on this program object (the plans refer to its ops by position).
        dags, plans = rebind(program, dags, plans)
    return dags, plans


@dataclass(frozen=True)
class FusePartition(ModulePass):
    """Groups calls into kernels chosen by the cost model and a CP-SAT cover; plan `plan` of the `top` best."""

    name = "fuse-partition"
    max_size: int = 8
    top: int = 1
    plan: int = 0
    n: int = DEFAULT_BATCH
    profile: str = "h100"
    keep: int = 2
    registers: str | None = None
    budget: int = DEFAULT_CONFIG_BUDGET
    loops: str = "auto"
    per_thread: str = "auto"
    phases: bool = True
    recompute: str = "auto"
    finish: str = "auto"
    notes: bool = True
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "max_size": "most calls in one kernel, except a block's whole phase (see phases)",
        "top": "how many best plans to search for",
        "plan": "which of them to apply (0 = best)",
        "n": "batch size the cost model predicts for",
        "profile": "device profile: h100, h200, cpu (the CPU backend's), or one saved by 'irfuse calibrate'",
        "keep": "configurations kept per group after pruning",
        "registers": "register table written by 'irfuse compile' (registers.json): ptxas counts instead of "
                     "estimates",
        "budget": "configurations the search analyses before it leaves larger groups out (the same plan on "
                  "any machine; a warning says when it was reached)",
        "loops": "auto: a loop may run inside a kernel where the cost model finds it cheaper; host: every loop "
                 "runs from the host, its body's kernels launched once per iteration",
        "per_thread": "auto: the threads of a kernel without a loop may run 2 or 4 elements each where the cost "
                      "model finds it cheaper; one: one element a thread in every kernel",
        "recompute": "a per-element value a later pass over the batch reads: auto: stored or computed again there, "
                     "whichever the cost model finds cheaper; never: stored; always: computed again",
        "finish": "a reduction's partials: auto: combined by the reducing kernel's last block on the GPU where the "
                  "cost model finds it faster than combine kernels (for launches of at most the blocks it names); "
                  "last-block: there wherever a launch has at most 8192 blocks; kernels: by combine kernels",
        "notes": "true: the plan's notes (the budget reached) are printed as warnings; false: not (the programs "
                 "irfuse derives for a call, a tangent's assembly or diagonal, whose budget it chose)",
        "phases": "true: a block's calls between reductions (an element routine's unrolled code) are also offered "
                  "as one kernel however many they are, when max-size is above 1; false: no kernel holds more "
                  "than max-size calls",
    }

    def search(self, program: kas.ProgramOp, itemsize: int, progress=None, layout: str = "aos"):
        """(block DAGs, the best plans, the device profile) of the search this pass applies."""
        self.check_options()
        _, dags, plans = self.choose(program, itemsize, progress, layout)
        return dags, plans, load_profile(self.profile)

    def check_options(self) -> None:
        if self.top < 1:
            raise UsageError(f"fuse-partition: top must be at least 1, got {self.top}")
        if self.keep < 1:
            raise UsageError(f"fuse-partition: keep must be at least 1 (configurations kept per group), got {self.keep}")
        if not 0 <= self.plan < max(self.top, 1):
            raise UsageError(f"fuse-partition: plan={self.plan} is not among the top={self.top} plans")
        if self.n < 1:
            raise UsageError(f"fuse-partition: n must be at least 1, got {self.n}")
        if self.budget < 1:
            raise UsageError(f"fuse-partition: budget must be at least 1, got {self.budget}")
        if self.loops not in LOOP_PLACEMENTS:
            raise UsageError(f"fuse-partition: loops must be one of {', '.join(LOOP_PLACEMENTS)}, got '{self.loops}'")
        if self.per_thread not in PER_THREAD_CHOICES:
            raise UsageError(f"fuse-partition: per_thread must be one of {', '.join(PER_THREAD_CHOICES)}, "
                             f"got '{self.per_thread}'")
        if self.recompute not in RECOMPUTE_CHOICES:
            raise UsageError(f"fuse-partition: recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, "
                             f"got '{self.recompute}'")
        check_finish(self.finish, self.name)

    def _search(self, program: kas.ProgramOp, itemsize: int, progress=None, layout: str = "aos"):
        return search_plans(program, self.n, self.profile, itemsize, self.max_size, max(self.top, self.plan + 1),
                            self.keep, self.registers, progress, self.budget, layout, self.loops, self.per_thread,
                            self.phases)

    def choose(self, program: kas.ProgramOp, itemsize: int, progress=None, layout: str = "aos"):
        """(the top-level calls of `program` whose values to compute again, the block DAGs and best
        plans of that variant): each variant planned on a copy of the program (see the module's
        docstring), the least predicted time taken, the variant computing fewer values again where
        they tie. The plans say which values are stored and which computed again."""
        crossing = crossing_values(program) if self.recompute != "never" else []
        if self.recompute == "always" or not crossing:
            subsets = [crossing]
        elif len(crossing) <= MAX_COMBINED:
            subsets = [[op for k, op in enumerate(crossing) if mask >> k & 1] for mask in range(1 << len(crossing))]
            subsets.sort(key=len)
        else:
            subsets = [[], crossing]
        best = None
        ops = list(program.body.block.ops)
        for subset in subsets:
            target = program
            if subset:
                target = program.clone()
                copies = list(target.body.block.ops)
                recompute(target, [copies[ops.index(op)] for op in subset])
            dags, plans = self._search(target, itemsize, progress, layout)
            if best is None or plans[0].predicted_time < best[2][0].predicted_time:
                best = (subset, dags, plans)
        assert best is not None
        subset, dags, plans = best
        for plan in plans:
            plan.recomputed = [value_name(op) for op in subset]
            plan.stored = [value_name(op) for op in crossing if op not in subset]
        return best

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        itemsize = itemsize_of(op)  # the cost model counts bytes of the module's element type
        layout = layout_of(op)  # and knows how they lie in global memory
        for program in [p for p in op.walk() if isinstance(p, kas.ProgramOp)]:
            refuse_nodal_statements(program, self.name)
            self.check_options()
            profile = load_profile(self.profile)
            again, dags, plans = self.choose(program, itemsize, layout=layout)
            if again:
                # The chosen variant: the program rewritten as its planned copy was, and the same
                # plans bound to it (the search's memo holds them under the same text).
                recompute(program, again)
                dags, plans = self._search(program, itemsize, layout=layout)
            if self.plan >= len(plans):
                raise NoSuchPlan(len(plans), self.plan)
            plan = plans[self.plan]
            loc = program.location
            where = loc.filename.data if isinstance(loc, FileLineColLoc) else None
            print_diagnostics([Diagnostic(f"fuse-partition: {note}", where, severity="warning")
                               for note in plan.notes if self.notes])
            prefix = program.sym_name.data
            count = 0
            in_kernel = {(c.dag, i) for c in plan.configs for i in c.group}
            absorbed: set[int] = set()  # bodies of loops that run inside a kernel (parents come first)
            for d, dag in enumerate(dags):
                if dag.parent is not None and (dag.parent[0] in absorbed or dag.parent in in_kernel):
                    absorbed.add(d)
                    continue
                # Earlier blocks' rewrites renamed values this block reads: take them afresh, in
                # copies of the configurations (the search's are kept for the next plan applied).
                chosen = [replace(c, **dict(zip(("inputs", "outputs"), external_values(dag, c.group))))
                          for c in sorted((c for c in plan.configs if c.dag == d), key=lambda c: c.group)]
                names, kernels = [], []
                for c in chosen:
                    opnames = [node_name(dag.ops[i]) for i in c.group]
                    tail = "_".join(opnames[:3]) + ("_etc" if len(opnames) > 3 else "")
                    name = f"{prefix}_k{count}_{tail}"
                    count += 1
                    kernel = kernel_from_config(c, dag, name)
                    mark_finish(kernel, self.finish, profile)
                    Rewriter.insert_op(kernel, InsertPoint.before(program))
                    names.append(name)
                    kernels.append(kernel)
                _reorder_and_launch(dag, chosen, names, kernels)
            erase_unread_gathers(program)
