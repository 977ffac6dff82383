"""A connectivity prepared once: its node numbers checked and kept, and its inverse made
(on the host, or on the GPU where it is given there).

A call of a program over a mesh checks every node number of a connectivity it is given and
makes the inverse its scatters add through (each node's slots in ascending order: a sort of
its entries). Given as a `Connectivity`, both are done once, when it is made, and every call
takes them as they are; its node numbers are a private read-only copy, so no later change to
the caller's array can make them disagree with what was checked."""

from __future__ import annotations

import time

import numpy as np

from irfuse.diagnostics import UsageError, is_whole
from irfuse.mesh.on_gpu import checked_on_gpu, gpu_tensor, inverse_on_gpu
from irfuse.mesh.on_gpu import on_device as on_gpu_device
from irfuse.mesh.order import check_connectivity, check_node_count
from irfuse.mesh.scatter import ScatterInverse, scatter_order


class Connectivity:
    """`conn` (E, K) node numbers of a mesh of `nodes` nodes, checked, with its scatter order
    (`irfuse.mesh.inverse_connectivity`); `seconds`: what preparing it took.

    Given a GPU array (a PyTorch CUDA tensor, or any array PyTorch takes through DLPack or
    `__cuda_array_interface__`), or `device=` a GPU's number, the check and the scatter order
    are made on that GPU (`irfuse.mesh.on_gpu`: the same order as the host's, entry for entry)
    and kept there for the calls on GPU arrays; `conn` and `inverse` are copied to the host
    when first asked for."""

    def __init__(self, conn, nodes: int, device: int | None = None):
        check_node_count("Connectivity", nodes)
        if isinstance(conn, Connectivity):
            raise UsageError(f"Connectivity: conn is a Connectivity already (of {conn.nodes} nodes): pass it where "
                             "a connectivity goes as it is")
        start = time.perf_counter()
        self.nodes = int(nodes)
        self._on_device: dict[int, tuple] = {}  # id(device) -> (device, node numbers, starts, slots)
        self._gpu: tuple | None = None  # (node numbers, scatter order) as GPU tensors, where made there
        self._conn = self._inverse = None
        self._patterns: dict[int, object] = {}  # D -> its SparsePattern
        self.kept: dict = {}  # what calls keep with it (its node numbers as a device's indices)
        given = t = gpu_tensor(conn, "Connectivity: conn")
        if device is not None:
            t = on_gpu_device(conn if t is None else t, device)
        # The node numbers kept are a copy, never the caller's memory: the caller writing their
        # array afterwards (a buffer used again for the next mesh) changed the numbers the
        # kernels read behind the check and the scatter order made from them (wrong sums, or
        # reads and writes out of bounds), and a host array of int32 was made read-only.
        if t is not None:
            checked = checked_on_gpu(t, self.nodes, "Connectivity: conn")
            if given is not None and checked.untyped_storage().data_ptr() == given.untyped_storage().data_ptr():
                checked = checked.clone()
            if checked.numel() >= 2**31:
                raise UsageError(f"Connectivity: {checked.numel()} entries; a scatter adds fewer than 2^31")
            self._gpu = (checked, inverse_on_gpu(checked, self.nodes))
            import torch

            torch.cuda.synchronize(checked.device)  # (made before any stream of irfuse's reads it)
        else:
            checked = check_connectivity(conn, self.nodes)
            if checked.size >= 2**31:
                raise UsageError(f"Connectivity: {checked.size} entries; a scatter adds fewer than 2^31")
            self._conn = np.array(checked, dtype=np.int32, order="C")  # (a copy, whatever the type given)
            self._conn.flags.writeable = False
            self._inverse = scatter_order(self._conn, self.nodes)
            for a in self._inverse:
                a.flags.writeable = False
        self.seconds = time.perf_counter() - start

    @property
    def conn(self) -> np.ndarray:
        """The node numbers, int32, read-only (on the host: copied from the GPU the first time)."""
        if self._conn is None:
            self._conn = self._gpu[0].cpu().numpy()
            self._conn.flags.writeable = False
        return self._conn

    @property
    def inverse(self) -> ScatterInverse:
        """The scatter order (`irfuse.mesh.ScatterInverse`), on the host."""
        if self._inverse is None:
            self._inverse = ScatterInverse(*(a.cpu().numpy() for a in self._gpu[1]))
            for a in self._inverse:
                a.flags.writeable = False
        return self._inverse

    @property
    def on_gpu(self):
        """The GPU tensors (node numbers, scatter order) where it was prepared on a GPU, else None."""
        return self._gpu

    def on_device(self, device) -> tuple:
        """(node numbers, its scatter order) as buffers of a runtime device (the order's arrays
        in `ScatterInverse`'s order): where it was prepared on that device's GPU, its own
        tensors; else uploaded the first time a device asks and kept for its later calls (the
        device kept alive with them)."""
        kept = self._on_device.get(id(device))
        if kept is None:
            if not callable(getattr(device, "upload_integers", None)):
                # (the runtime's own call: a GPU's number or a tensor's device is not one)
                raise UsageError(f"Connectivity.on_device takes a runtime device (the object a compiled program's "
                                 f"calls run on), not {type(device).__name__} {device!r:.60}")
            if self._gpu is not None and getattr(device, "ordinal", None) == self._gpu[0].device.index:
                kept = (device, _Address(self._gpu[0]), tuple(_Address(a) for a in self._gpu[1]))
            else:
                kept = (device, device.upload_integers(self.conn),
                        tuple(device.upload_integers(a) for a in self.inverse))
            self._on_device[id(device)] = kept
        return kept[1], kept[2]

    def sparse_pattern(self, d: int):
        """The pattern of its matrix of D x D blocks over the nodes (`irfuse.mesh.assembly`),
        made the first time it is asked for and kept: on its GPU where it was prepared there."""
        from irfuse.mesh.assembly import sparse_pattern

        if not is_whole(d) or d < 1:
            raise UsageError(f"sparse_pattern: d is the size of a block (the values a node holds), a positive whole "
                             f"number, not {d!r}")
        if d not in self._patterns:
            if self._gpu is None:
                self._patterns[d] = sparse_pattern(self.conn, self.nodes, d)
            else:  # (from the nodes' slots, kept: the owner-computes assembly reads them too)
                from irfuse.mesh.assembly import node_slots, slots_key

                gpu = self._gpu[0]
                lists = self.kept.get(slots_key(gpu.device))
                if lists is None:
                    lists = self.kept[slots_key(gpu.device)] = node_slots(gpu, self.nodes)
                self._patterns[d] = sparse_pattern(gpu, self.nodes, d, lists=lists)
        return self._patterns[d]

    def __getstate__(self) -> dict:
        # (device buffers, GPU tensors and patterns do not travel: the host copies do)
        return {**self.__dict__, "_on_device": {}, "_gpu": None, "_conn": self.conn, "_inverse": self.inverse,
                "_patterns": {}, "kept": {}}

    def __setstate__(self, state: dict) -> None:
        # (NumPy's pickling makes arrays writable again: the node numbers and the scatter order
        # stay read-only, as where they were made)
        self.__dict__.update(state)
        for a in (self._conn, *self._inverse):
            a.flags.writeable = False

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self._gpu[0].shape) if self._gpu is not None else self._conn.shape  # type: ignore[return-value]

    def __repr__(self) -> str:
        where = f" on GPU {self._gpu[0].device.index}" if self._gpu is not None else ""
        return (f"Connectivity({self.shape[0]} elements of {self.shape[1]} nodes, {self.nodes} nodes{where}; "
                f"prepared in {self.seconds * 1e3:.1f} ms)")


class _Address:
    """A GPU tensor as a runtime buffer: its address (`int`), the tensor kept alive with it."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def __int__(self) -> int:
        return self.tensor.data_ptr()
