"""The groups a scatter-add sums in: what the element kernel, the scatter kernel, the NumPy
reference and a connectivity's preparation agree on (`irfuse.mesh.scatter` says why).

A connectivity of K nodes an element is cut into groups of `group_elements(K)` consecutive
elements (the last one may be short): at most `GROUP_SLOTS` (element, position) slots a
group. Within a group, the rows of the slots that name one node are added in ascending slot
order into one partial (the first row, then each later one); each node then adds its
partials in ascending group order onto 0. The element kernel sums the groups of its block
(its blocks hold whole groups) and writes the partials; the scatter kernel adds each node's.

The partials are numbered group by group, within a group longest first (equal lengths in the
order of their first slots): group g's are `bases[g]` to `bases[g + 1] - 1`. Their numbering
changes no sum (a node has one partial a group, added in group order), but the element kernel
deals a block's partials to its threads rank by rank across its groups, and a warp runs as many
of its partials' members as the longest has: longest first, a warp's partials are of like
lengths (on a Morton mesh of tets, 34 warp turns a block of 128 elements instead of 55).
`members` lists each group's slots partial by partial, each partial's in ascending order, as
slots within the group (one byte each where a group has at most 256, else two); partial p's run
of them starts at `firsts[p]` within its group's and ends where the next partial's starts (or at
the group's end). So the thread of partial p reads its rows' places side by side, not one after
another.

An element of more than `GROUP_SLOTS` nodes (a hexahedron of order 6 to 9: 343 to 1,000) is a
group of its own, its slots numbered in two bytes (`slot_bytes`); up to `ELEMENT_SLOTS` nodes.
"""

GROUP_SLOTS = 256  # slots of a group of several elements at most: one byte numbers them (measured: see irfuse.mesh.scatter)
ELEMENT_SLOTS = 1024  # nodes of an element at most (the language's kas.MAX_DIM): a group of its own past GROUP_SLOTS


def group_elements(nodes_per_element: int) -> int:
    """Elements a group holds: the largest power of two whose slots fit `GROUP_SLOTS` (a
    power of two, so that blocks of a power of two of elements hold whole groups); 1 for an
    element of more nodes, up to `ELEMENT_SLOTS`; 0 past that (no scatter takes it)."""
    if nodes_per_element < 1 or nodes_per_element > ELEMENT_SLOTS:
        return 0
    g = 1
    while 2 * g * nodes_per_element <= GROUP_SLOTS:
        g *= 2
    return g


def slot_bytes(nodes_per_element: int) -> int:
    """Bytes of a slot's number within its group (`members`, `firsts`): 1 where a group holds
    at most `GROUP_SLOTS` slots, else 2."""
    return 1 if group_elements(nodes_per_element) * nodes_per_element <= GROUP_SLOTS else 2


def slot_ctype(nodes_per_element: int) -> str:
    """The C type of a slot's number (`slot_bytes`)."""
    return "unsigned char" if slot_bytes(nodes_per_element) == 1 else "unsigned short"


def slot_dtype(nodes_per_element: int) -> str:
    """The NumPy type name of a slot's number (`slot_bytes`)."""
    return "uint8" if slot_bytes(nodes_per_element) == 1 else "uint16"


def partial_order_key(heads, lengths, per_group: int):
    """Each partial's place in the numbering above, as a key that sorts them into it: group by
    group (a group's `per_group` slots), within a group longest first, equal lengths by their
    first slots. `heads`: each partial's first slot (64-bit integers), `lengths`: its members;
    arrays of NumPy or PyTorch alike. The keys are distinct (a slot heads one partial)."""
    return ((heads // per_group) * (per_group + 1) + (per_group - lengths)) * per_group + heads % per_group
