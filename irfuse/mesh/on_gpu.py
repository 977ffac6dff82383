"""A mesh prepared where its arrays are: a connectivity's check and scatter order, and a
Morton renumbering, made on the GPU by the arrays' own library (PyTorch: sorts, counts and
prefix sums on the device), step for step as the host does them (`irfuse.mesh.scatter`,
`irfuse.mesh.order`), so the orders are the same, entry for entry.

A GPU array is a PyTorch CUDA tensor, or any array with `__dlpack_device__` on a CUDA device
or `__cuda_array_interface__` (CuPy, Numba, JAX), taken by PyTorch without a copy; without
PyTorch installed such an array is refused by name. Every step is a whole-array operation of
the library, stable where order matters (a segmented sort of each group's slots, a stable
sort of the partials by node, counts by `bincount`), so the result does not depend on how the
library schedules it.
"""

from __future__ import annotations

import numpy as np

from irfuse.artifact.scatter_groups import ELEMENT_SLOTS, group_elements, partial_order_key, slot_dtype
from irfuse.diagnostics import UsageError, is_whole


def gpu_tensor(a, what: str = "conn"):
    """`a` as a PyTorch CUDA tensor (no copy) where it is an array on a GPU, else None."""
    kind = None
    if hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray):
        try:
            kind = int(a.__dlpack_device__()[0])
        except Exception:  # noqa: BLE001 -- (an object that only looks like an array: not one of ours)
            kind = None
    on_gpu = kind in (2, 13) or (kind is None and hasattr(a, "__cuda_array_interface__"))  # (kDLCUDA, managed)
    if not on_gpu:
        return None
    try:
        import torch
    except ImportError:
        raise UsageError(f"{what} is a {type(a).__qualname__} on a GPU; irfuse prepares a mesh on the GPU with "
                         "PyTorch, which is not installed: pass a NumPy array, or install torch") from None
    if isinstance(a, torch.Tensor):
        return a
    return torch.from_dlpack(a) if kind is not None else torch.as_tensor(a, device="cuda")


def on_device(a, device: int):
    """A host array `a` copied to GPU `device` as a PyTorch tensor (`device=` of a preparation)."""
    if not is_whole(device) or device < 0:
        raise UsageError(f"device= is a GPU's number (0, 1, ...), not {device!r}")
    try:
        import torch
    except ImportError:
        raise UsageError("device= prepares a mesh on a GPU with PyTorch, which is not installed") from None
    if not torch.cuda.is_available() or device >= torch.cuda.device_count():
        raise UsageError(f"device={device}: PyTorch sees {torch.cuda.device_count() if torch.cuda.is_available() else 0}"
                         " GPUs")
    return torch.as_tensor(np.asarray(a), device=f"cuda:{device}")


def checked_on_gpu(t, nodes: int, what: str = "conn"):
    """A GPU connectivity (E, K) of int32 or int64 node numbers, every entry in [0, nodes), as
    a contiguous int32 tensor; a `UsageError` naming the element and position of the first
    entry outside otherwise (as `irfuse.mesh.check_connectivity`)."""
    import torch

    if t.dtype not in (torch.int32, torch.int64):
        raise UsageError(f"{what} is a connectivity of {t.dtype} values; it takes int32 or int64 node numbers")
    if t.ndim != 2 or t.shape[1] < 1:
        raise UsageError(f"{what} must be an array of shape (elements, nodes per element), not {tuple(t.shape)}")
    bad = ((t < 0) | (t >= nodes)).reshape(-1)
    if len(bad) and bool(bad.any()):
        slot = int(torch.argmax(bad.to(torch.uint8)))  # (the first: argmax takes the lowest index of the maximum)
        k = t.shape[1]
        raise UsageError(f"{what}: element {slot // k}, position {slot % k} names node {int(t.reshape(-1)[slot])}, "
                         f"outside [0, {nodes})")
    return t.to(torch.int32).contiguous()


def inverse_on_gpu(conn, nodes: int) -> tuple:
    """The scatter order of a checked GPU connectivity (`checked_on_gpu`): the tensors of
    `irfuse.mesh.ScatterInverse` in its order and types, equal to the host's
    (`irfuse.mesh.scatter._inverse`) entry for entry."""
    import torch

    dev = conn.device
    e, k = conn.shape
    n = e * k
    per_group = group_elements(k) * k
    if not per_group:
        raise UsageError(f"a scatter adds rows of elements of at most {ELEMENT_SLOTS} nodes, not {k}")
    groups = -(-n // per_group)
    i64 = dict(dtype=torch.int64, device=dev)
    padded = torch.full((groups * per_group,), np.iinfo(np.int32).max, dtype=torch.int32, device=dev)
    padded[:n] = conn.reshape(-1)
    local = torch.argsort(padded.view(groups, per_group), dim=1, stable=True)  # (each group's slots by node)
    local += torch.arange(0, groups * per_group, per_group, **i64)[:, None]
    order = local.reshape(-1)[:n]  # the slots by (group, node, slot)
    by_node = padded[order]
    new_run = torch.ones(n, dtype=torch.bool, device=dev)
    new_run[1:] = by_node[1:] != by_node[:-1]
    new_run[per_group::per_group] = True  # (a group's first slot starts a run)
    run_starts = torch.nonzero(new_run).reshape(-1)
    heads = order[run_starts]  # each run's first slot
    lengths = torch.diff(run_starts, append=torch.tensor([n], **i64))
    group = heads // per_group
    by_partial = torch.argsort(partial_order_key(heads, lengths, per_group))  # the runs in partial order
    run_partial = torch.empty_like(by_partial)
    run_partial[by_partial] = torch.arange(len(by_partial), **i64)
    begins = torch.zeros(len(heads) + 1, **i64)  # where each partial's slots start
    begins[1:] = torch.cumsum(lengths[by_partial], 0)
    place = torch.repeat_interleave(begins[:-1][run_partial] - run_starts, lengths)
    place += torch.arange(n, **i64)
    slots = torch.empty(n, **i64)
    slots[place] = order
    node_of = by_node[run_starts][by_partial].to(torch.int64)
    per_groups = torch.bincount(group, minlength=groups)
    bases = torch.zeros(groups + 1, **i64)
    bases[1:] = torch.cumsum(per_groups, 0)
    firsts = begins[:-1] % per_group
    partials = torch.argsort(node_of, stable=True)  # each node's partials, ascending
    starts = torch.zeros(nodes + 1, **i64)
    starts[1:] = torch.cumsum(torch.bincount(node_of, minlength=nodes), 0)
    slot = getattr(torch, slot_dtype(k))  # (one byte a slot number, or two where a group has more slots)
    return (starts, partials.to(torch.int32), (slots % per_group).to(slot), firsts.to(slot), bases.to(torch.int32))


def morton_order_on_gpu(coords):
    """Nodes along a Morton curve through GPU coordinates (M, D), D at most 3, as
    `irfuse.mesh.order._morton_order`: 21-bit integers per axis from float64, bits
    interleaved, ties in node order."""
    import torch

    if coords.ndim != 2:
        raise UsageError(f"reorder: coords must have shape (nodes, dimensions), not {tuple(coords.shape)}")
    if coords.shape[1] > 3:
        raise UsageError(f"reorder: a Morton curve takes at most 3 coordinates, not {coords.shape[1]}")
    c = coords.to(torch.float64)
    if not bool(torch.isfinite(c).all()):
        raise UsageError("reorder: coords must be finite")
    lo, hi = c.min(dim=0).values, c.max(dim=0).values
    span = torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    q = torch.clamp(((c - lo) / span * (1 << 21)).to(torch.int64), max=(1 << 21) - 1)
    key = torch.zeros(len(c), dtype=torch.int64, device=c.device)
    dims = c.shape[1]
    for bit in range(21):
        for d in range(dims):
            key |= ((q[:, d] >> bit) & 1) << (bit * dims + d)
    return torch.argsort(key, stable=True)


def element_order_on_gpu(conn, node_order):
    """Elements by their sorted new node numbers, lowest first (`irfuse.mesh.reorder`'s
    lexicographic order, a stable sort a column at a time from the last)."""
    import torch

    new_number = torch.empty_like(node_order)
    new_number[node_order] = torch.arange(len(node_order), device=node_order.device)
    renamed = torch.sort(new_number[conn.to(torch.int64)], dim=1).values
    order = torch.arange(len(conn), device=conn.device)
    for col in reversed(range(renamed.shape[1])):
        order = order[torch.argsort(renamed[order, col], stable=True)]
    return order


# On the host, the same PyTorch code runs on CPU tensors (its sorts several threads wide):
# used where PyTorch is imported already, or for a mesh large enough that importing it pays.
HOST_TORCH_ENTRIES = 1 << 22  # connectivity entries from which PyTorch is imported for it


def host_torch(entries: int):
    """PyTorch for a host mesh's preparation of `entries` connectivity entries, or None."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None and entries >= HOST_TORCH_ENTRIES:
        try:
            import torch
        except ImportError:
            return None
    return torch


def inverse_on_host(conn: np.ndarray, nodes: int) -> tuple:
    """The scatter order of a checked host connectivity as NumPy arrays (`ScatterInverse`'s
    order and types): `inverse_on_gpu` on CPU tensors where `host_torch` allows, the same
    entries as NumPy's (`irfuse.mesh.scatter._inverse`) in about half the time on 2 cores."""
    torch = host_torch(conn.size)
    if torch is None:
        return None
    return tuple(a.numpy() for a in inverse_on_gpu(_read_only_tensor(torch, conn, np.int32), nodes))


def morton_on_host(conn: np.ndarray, coords: np.ndarray) -> tuple | None:
    """`reorder`'s Morton (node order, element order) of a checked host mesh as NumPy arrays:
    `morton_order_on_gpu` and `element_order_on_gpu` on CPU tensors where `host_torch`
    allows (the host's permutations), else None."""
    torch = host_torch(conn.size)
    if torch is None:
        return None
    node_order = morton_order_on_gpu(_read_only_tensor(torch, coords, np.float64))
    element_order = element_order_on_gpu(_read_only_tensor(torch, conn, np.int32), node_order)
    return node_order.numpy(), element_order.numpy()


def _read_only_tensor(torch, a: np.ndarray, dtype):
    """A CPU tensor over NumPy array `a` (converted to `dtype` where it is not), which the
    code above only reads (PyTorch warns of arrays marked read-only)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))

