"""Linearization: the order of a kernel's calls with the least peak shared memory."""

from __future__ import annotations

from irfuse.analysis.placements import placements
from irfuse.kernel.model import KernelModel, OpKind
from irfuse.transforms.barriers import with_barrier_after_every_op

EXACT_LINEARIZE_LIMIT = 12  # calls; above this the greedy heuristic orders them


def _dependencies(model: KernelModel) -> dict[int, set[int]]:
    calls = model.calls()
    producer = {op.result: i for i, op in enumerate(calls)}
    return {i: {producer[a] for a in op.args if a in producer} for i, op in enumerate(calls)}


def _stored_before_parts(model: KernelModel, found: dict, calls: list, deps: dict[int, set[int]],
                         order: list[int]) -> list[int]:
    """`order` with each call that makes a stored value in shared memory, read by no call, moved
    before the first part of a stored value built in place (`analysis.placements`) with the
    calls after that part it needs, where none of them is a part: the value built in place is
    live from its first part on, so a value staged meanwhile would need words of its own (J2's
    consistent tangent: its stress and `ep`, staged after the directions, took 10 words an
    element more). `found`: the model's `placements`."""
    if not found:
        return order
    readers = {a for op in calls for a in op.args}
    for p in sorted(found.values(), key=lambda p: p.value):
        leaves = {leaf for leaf, _ in p.writes}
        at = {c: i for i, c in enumerate(order)}
        start = min(at[c] for c, op in enumerate(calls) if op.result in leaves)
        hoisted: set[int] = set()
        for c in order[start:]:
            v = model.values[calls[c].result]
            if not (v.shared and v.stored) or calls[c].result in readers or calls[c].result in found:
                continue
            cone, work = set(), [c]
            while work:  # (what it needs that runs after the first part)
                d = work.pop()
                if d not in cone and at[d] >= start and d not in hoisted:
                    cone.add(d)
                    work += deps[d]
            if not any(calls[d].result in leaves for d in cone):
                hoisted |= cone
        if hoisted:
            order = order[:start] + [c for c in order[start:] if c in hoisted] + \
                [c for c in order[start:] if c not in hoisted]
    return order


def linearize(model: KernelModel, *, copy: bool = True) -> KernelModel:
    """Orders the calls to minimize peak shared memory (exact up to EXACT_LINEARIZE_LIMIT
    calls, greedy above), then makes stored values before a value built in place takes its
    words (`_stored_before_parts`); loads come first, each store right after its value's producer.
    A kernel with loops keeps its order (the program's): calls do not move into or out of a
    loop, and its body is short."""
    out = model.copy() if copy else model
    if out.has_loops():
        return with_barrier_after_every_op(out)
    calls = out.calls()
    n = len(calls)
    found = placements(out)  # (stored values built in place: the order around their parts)
    deps = _dependencies(out)
    size = {vid: (v.size * out.by if v.shared else 0) for vid, v in out.values.items()}
    users: dict[int, set[int]] = {}
    for i, op in enumerate(calls):
        for a in op.args:
            users.setdefault(a, set()).add(i)
    inputs = [vid for vid, v in out.values.items() if v.is_input]

    # A value's users as a bit set of calls: it is live after `done` while one is not done.
    user_bits = {vid: sum(1 << u for u in us) for vid, us in users.items()}
    counted = set(inputs) | {op.result for op in calls}  # (what live_after counts at all)
    # done -> the shared words live after those calls: inputs with a user left, and results of
    # calls done with a user left; made from the set one call smaller (`after`), as each
    # order's step adds one call.
    live: dict[int, int] = {0: sum(size[vid] for vid in inputs if user_bits.get(vid, 0))}

    def after(done: int, c: int) -> int:
        """live_after(done | 1 << c), from live_after(done) (c's dependencies done)."""
        key = done | (1 << c)
        known = live.get(key)
        if known is None:
            op = calls[c]
            known = live[done]
            for a in set(op.args):  # (c used them, so they were live) those c was the last user of
                if a in counted and user_bits.get(a, 0) & ~key == 0:
                    known -= size[a]
            if user_bits.get(op.result, 0) & ~key:  # type: ignore[arg-type]
                known += size[op.result]  # type: ignore[index]
            live[key] = known
        return known

    def during(done: int, c: int) -> int:
        return live[done] + size[calls[c].result]  # type: ignore[index]

    needs = [sum(1 << d for d in deps[c]) for c in range(n)]  # each call's dependencies, a bit set

    def ready(done: int) -> list[int]:
        return [c for c in range(n) if not (done >> c) & 1 and needs[c] & ~done == 0]

    order: list[int] = []
    if n <= EXACT_LINEARIZE_LIMIT:
        best: dict[int, tuple[int, list[int]]] = {0: (live[0], [])}
        frontier = [0]
        for _ in range(n):
            nxt: dict[int, tuple[int, list[int]]] = {}
            for done in frontier:
                peak, seq = best[done]
                for c in ready(done):
                    p = max(peak, during(done, c))
                    key = done | (1 << c)
                    after(done, c)
                    if key not in nxt or p < nxt[key][0] or (p == nxt[key][0] and seq + [c] < nxt[key][1]):
                        nxt[key] = (p, seq + [c])
            best.update(nxt)
            frontier = list(nxt)
        order = best[(1 << n) - 1][1] if n else []
    else:
        # The calls whose dependencies are done, kept as each call is done (scanning every call
        # at each step made long element codes' kernels quadratic to order).
        waiting = [len(deps[c]) for c in range(n)]
        dependents: list[list[int]] = [[] for _ in range(n)]
        for c in range(n):
            for d in deps[c]:
                dependents[d].append(c)
        can_run = {c for c in range(n) if not waiting[c]}
        done = 0
        # Where a stored value is built in place, its parts' chains run one after another: of
        # calls alike in shared memory, the one reading the latest made value first (each part
        # then written and its registers free before the next part's chain starts; in program
        # order J2's nine directions ran step by step side by side, 128 registers against 94).
        depth = bool(found)
        made_at: dict[int, int] = {}

        def latest(c: int) -> int:
            return -max((made_at.get(d, -1) for d in deps[c]), default=-1) if depth else 0

        while len(order) < n:
            c = min(can_run, key=lambda c: (during(done, c), latest(c), c))
            can_run.remove(c)
            made_at[c] = len(order)
            for u in dependents[c]:
                waiting[u] -= 1
                if not waiting[u]:
                    can_run.add(u)
            order.append(c)
            after(done, c)
            done |= 1 << c
    order = _stored_before_parts(out, found, calls, deps, order)
    stores: dict[int, list] = {}  # a value may be stored and reduced: several stores
    for op in out.ops:
        if op.kind == OpKind.STORE:
            stores.setdefault(op.value, []).append(op)  # type: ignore[arg-type]
    new_ops = [op for op in out.ops if op.kind == OpKind.LOAD]
    for c in order:
        new_ops.append(calls[c])
        new_ops += stores.get(calls[c].result, [])  # type: ignore[arg-type]
    # A loaded value stored unchanged (an input that is also an output) is stored after the loads.
    placed = {id(op) for op in new_ops}
    for op in out.ops:
        if op.kind == OpKind.STORE and id(op) not in placed:
            new_ops.insert(len([o for o in new_ops if o.kind == OpKind.LOAD]), op)
    out.ops = new_ops
    return with_barrier_after_every_op(out)  # the old barriers belonged to the old order


