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

from irfuse.api.outputs import Outputs

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


_FREE: tuple | None = None  # the counts `_let_go` reads of a set nothing but this module holds
_storage_use = None


def _free_counts(entry: tuple) -> tuple:
    """The counts `_let_go` compares, read of a kept entry by the same steps (the holder, then
    each tensor by the loop's name, then its storage), so that whatever references this
    interpreter's frames hold while reading them are counted alike: (the holder's Python
    references, a tensor's Python ones, its C++ ones, its storage's and the storage object's)."""
    made = entry[0]
    a = sys.getrefcount(made)
    for t in made:
        b, c = sys.getrefcount(t), t._use_count()
        s = t.untyped_storage()
        return a, b, c, _storage_use(s._cdata), sys.getrefcount(s)


def _calibrate() -> tuple:
    global _FREE, _storage_use
    import torch

    _storage_use = torch._C._storage_Use_Count
    _FREE = _free_counts((Outputs(("probe",), [torch.empty(1)]), None, None))  # (as `OutputSets.kept` holds one)
    return _FREE


def _let_go(entry: tuple, shapes: tuple, addresses: tuple) -> bool:
    """Whether nothing but `entry` (a kept set: its outputs first) holds those outputs, any
    of their tensors or their memory, and each tensor is still the contiguous tensor it was
    made (`shapes`, `addresses`), asking no gradient. (One pass, each count compared as it is
    read: this runs at every call of a loop `y = prog(x)`, three outputs about 2 us.)"""
    free = _FREE or _calibrate()
    made = entry[0]
    if sys.getrefcount(made) != free[0]:
        return False
    k = 0
    for t in made:
        if sys.getrefcount(t) != free[1] or t._use_count() != free[2]:
            return False
        s = t.untyped_storage()
        if _storage_use(s._cdata) != free[3] or sys.getrefcount(s) != free[4]:
            return False
        if t.requires_grad or t.data_ptr() != addresses[k] or t.shape != shapes[k] or not t.is_contiguous():
            return False
        k += 1
    return True


class Place:
    """An output's address and size, as a run reads them (`GpuInPlaceRun.run`, `MeshInPlaceRun`)."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr: int, nbytes: int):
        self.ptr, self.nbytes = ptr, nbytes


class OutputSets:
    """Makes a call's outputs (see the module): `make(stream)` gives them, an `Outputs` in the
    program's output order, and their addresses. A set handed back is the `Outputs` an
    earlier call returned (nothing else held it), so that a call again makes no object."""

    def __init__(self, model, shapes: dict[str, tuple[int, ...]], dtype):
        self.names = tuple(shapes)
        self.shapes = tuple(tuple(s) for s in shapes.values())
        self.makers = [_allocator(model, shape, dtype) for shape in self.shapes]
        self.nbytes = [int(np.prod(shape)) * np.dtype(dtype).itemsize for shape in self.shapes]
        self.kept: list | None = [] if model.family == "torch" and sum(self.nbytes) <= REUSED_BYTES else None

    def make(self, stream: int, capturing: bool = False) -> tuple[Outputs, tuple[int, ...]]:
        kept = self.kept
        if kept is not None and not capturing:
            for k in range(len(kept)):
                entry = kept[k]  # (outputs, their addresses, stream)
                if entry[2] == stream and _let_go(entry, self.shapes, entry[1]):
                    kept.append(kept.pop(k))  # (the most recent last)
                    return entry[0], entry[1]
        made = Outputs(self.names, [make() for make, _ in self.makers])
        addresses = tuple(address(a) for a, (_, address) in zip(made, self.makers))
        if kept is not None and not capturing:
            kept.append((made, addresses, stream))
            if len(kept) > SETS_KEPT:
                kept.pop(0)
        return made, addresses

    def places(self, addresses: tuple[int, ...]) -> dict[str, Place]:
        """The outputs `make` gave (at `addresses`), by name, as a run reads them."""
        return {name: Place(ptr, nbytes) for name, ptr, nbytes in zip(self.names, addresses, self.nbytes)}
