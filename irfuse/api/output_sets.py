"""The outputs a call made again without `out=` hands back (`FastCall`, `MeshGpuFastCall`,
a staged program's call again): new arrays made with the caller's library's `empty`, or,
for PyTorch tensors, a set an earlier call made that the caller has let go of.

Why: a loop `y = prog(x)` drops each call's outputs one call later, so the caching allocator
hands the same two blocks back in turn; asking it costs `torch.empty`'s 3-7 us an output,
as much as the whole replay of the call's graph. Keeping the last two sets and handing one
back when nothing but this module holds it is what the allocator would have returned, at
the cost of a few reference counts, and its graph is the one already captured for those
addresses.

A set is handed back only where nothing outside holds any of its tensors or their memory:
no Python reference to the tensor (a view holds its base), no C++ one (autograd, a DLPack
capsule), no other tensor on its storage (`detach`, `numpy()`, `set_`), no reference to
its storage object; and only unchanged (address, shape, strides, type; no gradient asked
for), on the stream it was made for, and outside a stream capture. Sets larger than
`REUSED_BYTES` in all are never kept (their calls are bound by the device, not by
`empty`), nor are CuPy arrays, whose views and memory pointers leave no count to read."""

from __future__ import annotations

import sys

import numpy as np

REUSED_BYTES = 64 << 20  # the most a kept set of outputs may hold (two sets are kept)
SETS_KEPT = 2  # a loop `y = prog(x)` holds one set while the call makes the next


def _allocator(model, shape: tuple[int, ...], dtype):
    """(make, address of) for new arrays shaped `shape` in `model`'s library (a `DeviceArray`
    of the call): at the cost of the library's own `empty`."""
    if model.family == "torch":
        import functools

        import torch

        return (functools.partial(torch.empty, shape, dtype=getattr(torch, np.dtype(dtype).name),
                                  device=model.obj.device), lambda t: t.data_ptr())
    import cupy

    device = cupy.cuda.Device(model.obj.device.id)

    def make():
        with device:
            return cupy.empty(shape, dtype=dtype)
    return make, lambda a: a.data.ptr


def _holders(t) -> tuple:
    """A tensor's Python references, its C++ ones, its storage's and the storage object's
    (read the same way for `_FREE`, so the counts of this very code path, whatever the
    interpreter, are the ones compared)."""
    storage = t.untyped_storage()
    return sys.getrefcount(t), t._use_count(), _storage_use(storage._cdata), sys.getrefcount(storage)


_FREE: tuple | None = None  # the counts of a tensor nothing but a kept tuple holds
_storage_use = None


def _let_go(tensors: tuple, shapes: tuple, addresses: tuple) -> bool:
    """Whether nothing but `tensors` (a tuple kept here) holds any of these tensors or their
    memory, and each is still the contiguous tensor it was made (`shapes`, `addresses`),
    asking no gradient."""
    global _FREE, _storage_use
    if _FREE is None:
        import torch

        _storage_use = torch._C._storage_Use_Count
        probe = (torch.empty(1),)  # (held by a tuple alone, as a kept set's tensors are)
        _FREE = _holders(probe[0])
    free = _FREE
    for k in range(len(tensors)):  # (counted by index first: a name would hold the tensor itself)
        if _holders(tensors[k]) != free:
            return False
        t = tensors[k]
        if t.requires_grad or t.data_ptr() != addresses[k] or t.shape != shapes[k] or not t.is_contiguous():
            return False
    return True


class Place:
    """An output's address and size, as a run reads them (`GpuInPlaceRun.run`, `MeshInPlaceRun`)."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr: int, nbytes: int):
        self.ptr, self.nbytes = ptr, nbytes


class OutputSets:
    """Makes a call's outputs (see the module): `make(stream)` gives the arrays in the
    program's output order (a new list) and their addresses."""

    def __init__(self, model, shapes: dict[str, tuple[int, ...]], dtype):
        self.names = tuple(shapes)
        self.shapes = tuple(tuple(s) for s in shapes.values())
        self.makers = [_allocator(model, shape, dtype) for shape in self.shapes]
        self.nbytes = [int(np.prod(shape)) * np.dtype(dtype).itemsize for shape in self.shapes]
        self.kept: list | None = [] if model.family == "torch" and sum(self.nbytes) <= REUSED_BYTES else None

    def make(self, stream: int, capturing: bool = False) -> tuple[list, tuple[int, ...]]:
        kept = self.kept
        if kept is not None and not capturing:
            for k, (made, addresses, on) in enumerate(kept):
                if on == stream and _let_go(made, self.shapes, addresses):
                    kept.append(kept.pop(k))  # (the most recent last)
                    return list(made), addresses  # (a list of the caller's: the tuple kept is this one's)
        made = tuple(make() for make, _ in self.makers)
        addresses = tuple(address(a) for a, (_, address) in zip(made, self.makers))
        if kept is not None and not capturing:
            kept.append((made, addresses, stream))
            if len(kept) > SETS_KEPT:
                kept.pop(0)
        return list(made), addresses

    def places(self, addresses: tuple[int, ...]) -> dict[str, Place]:
        """The outputs `make` gave (at `addresses`), by name, as a run reads them."""
        return {name: Place(ptr, nbytes) for name, ptr, nbytes in zip(self.names, addresses, self.nbytes)}
