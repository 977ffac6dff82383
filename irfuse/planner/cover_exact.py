"""The cover of a small program found without CP-SAT, where it is the only best one.

Why: loading OR-Tools' solver (`cover_model`) costs a process 70-84 ms on the 2-core CI
machine, a tenth of a small program's cold compile, while the covers of most programs are a
few dozen configurations over a few dozen calls (every example's: at most 266 over 85), which a
search of exact covers settles in a millisecond or two. The answer must be CP-SAT's: where two
covers share the least total (CP-SAT's choice between them is its own), where the best cover's
kernels would depend on each other in a cycle (`search.solve_cover` cuts and solves again), or
where the search runs long (`NODES`, `DEPTH`, `WORK`), the cover is left to CP-SAT. The
objective is CP-SAT's, integers (`search.solve_cover`'s weights), so "least" and "equal" are
exact.

The search: the call with the fewest configurations still open is covered next, by each of
them in turn, cheapest a call first (a whole program's kernel before its calls one by one); a
branch stops where its cost so far plus every open call's cheapest share among the
configurations still open to it (a configuration's weight over its calls, rounded down: an
integer bound, exact) passes the best total found, and is followed where it may equal it, so
that a second best cover is seen (once one is, only where it may pass it).
"""

from __future__ import annotations

# Search steps before the cover is left to CP-SAT. Of 138 covers (every example, mesh and
# high-order example, J2's Jacobian and 20 random programs with loops, under the h100, h200
# and cpu profiles in both types) 121 settle within 100 steps, 127 within 300 (at most 10 ms
# on the 2-core CI machine); the other 11 are ties (two kernels of equal price: hex8, BP3),
# and a search given up so costs at most 19 ms there.
NODES = 1_000
# Kernels a cover the search follows may hold (its recursion's depth): a program of a thousand
# calls covered one by one would otherwise pass Python's recursion limit inside a compile.
DEPTH = 200
# Configurations the search may look at in all (each step reads every open call's): so that a
# program of thousands of calls is given to CP-SAT after some 50 ms, not seconds.
WORK = 200_000


class _TooLong(Exception):
    pass


def unique_cover(calls: list[int], groups: list[tuple[int, ...]], weights: list[int]) -> list[int] | None:
    """The indices (ascending) of the one cover of least total weight: each of `calls` (node
    numbers) in exactly one chosen group (`groups[i]`, node numbers, of weight `weights[i]`);
    None where two covers share the least total, a group holds no call, or the search passes
    `NODES` steps, `DEPTH` kernels or `WORK` configurations looked at. Every call must be in
    some group (the caller has said which is not)."""
    position = {node: k for k, node in enumerate(calls)}
    masks = []
    for group in groups:
        mask = 0
        for node in group:
            if node in position:
                mask |= 1 << position[node]
        if not mask:
            return None  # (a configuration of no call: CP-SAT's objective alone decides it)
        masks.append(mask)
    full = (1 << len(calls)) - 1
    options: list[list[int]] = [[] for _ in calls]
    for i, mask in enumerate(masks):
        for k in _bits(mask):
            options[k].append(i)
    # A configuration's share of each of its calls: its weight over them, rounded down, so that
    # the bound below is an integer no greater than any cover's total (exact, whatever the sizes)
    share = [w // mask.bit_count() for w, mask in zip(weights, masks)]
    for opts in options:  # (cheapest a call first)
        opts.sort(key=lambda i: (weights[i] / masks[i].bit_count(), i))
    best, found, ties, steps, work = float("inf"), None, 0, 0, 0
    chosen: list[int] = []

    def search(covered: int, cost: int) -> None:
        nonlocal best, found, ties, steps, work
        steps += 1
        if steps > NODES or len(chosen) > DEPTH or work > WORK:
            raise _TooLong
        if covered == full:
            if cost < best:
                best, found, ties = cost, sorted(chosen), 1
            elif cost == best:
                ties += 1
            return
        open_ = None  # (the configurations left to the open call with the fewest)
        bound = cost
        for k in _bits(full & ~covered):
            work += len(options[k])
            here = [i for i in options[k] if not masks[i] & covered]
            if not here:
                return  # (this call can no longer be covered)
            bound += share[here[0]]  # (the cheapest a call first: its share the least)
            if open_ is None or len(here) < len(open_):
                open_ = here
        # (once two covers share the best total, only a strictly better one changes the answer)
        if bound > best or ties > 1 and bound >= best:
            return
        for i in open_:
            chosen.append(i)
            search(covered | masks[i], cost + weights[i])
            chosen.pop()

    try:
        search(0, 0)
    except _TooLong:
        return None
    return found if ties == 1 else None


def _bits(mask: int):
    """The positions of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low
