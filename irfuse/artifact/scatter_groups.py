"""The groups a scatter-add sums in: what the element kernel, the scatter kernel, the NumPy
reference and a connectivity's preparation agree on (`irfuse.mesh.scatter` says why).

A connectivity of K nodes an element is cut into groups of `group_elements(K)` consecutive
elements (the last one may be short): at most `GROUP_SLOTS` (element, position) slots a
group. Within a group, the rows of the slots that name one node are added in ascending slot
order into one partial (the first row, then each later one); each node then adds its
partials in ascending group order onto 0. The element kernel sums the groups of its block
(its blocks hold whole groups) and writes the partials; the scatter kernel adds each node's.

The partials are numbered group by group, within a group in the order of their first slots:
group g's are `bases[g]` to `bases[g + 1] - 1`. `members` lists each group's slots partial
by partial, each partial's in ascending order, as slots within the group (one byte each:
a group has at most 256); partial p's run of them starts at `firsts[p]` within its group's
and ends where the next partial's starts (or at the group's end). So the thread of partial p
reads its rows' places side by side, not one after another.
"""

GROUP_SLOTS = 256  # slots of a group at most: one byte numbers them (measured: see irfuse.mesh.scatter)


def group_elements(nodes_per_element: int) -> int:
    """Elements a group holds: the largest power of two whose slots fit `GROUP_SLOTS` (a
    power of two, so that blocks of a power of two of elements hold whole groups); 0 where an
    element has more than `GROUP_SLOTS` nodes (no scatter takes it)."""
    if nodes_per_element < 1 or nodes_per_element > GROUP_SLOTS:
        return 0
    g = 1
    while 2 * g * nodes_per_element <= GROUP_SLOTS:
        g *= 2
    return g
