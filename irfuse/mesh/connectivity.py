"""A connectivity prepared once: its node numbers checked and kept, and its inverse made.

A call of a program over a mesh checks every node number of a connectivity it is given and
makes the inverse its scatters add through (each node's slots in ascending order: a sort of
its entries). Given as a `Connectivity`, both are done once, when it is made, and every call
takes them as they are; its node numbers are a private read-only copy, so no later change to
the caller's array can make them disagree with what was checked."""

from __future__ import annotations

import time

import numpy as np

from irfuse.diagnostics import UsageError
from irfuse.mesh.order import check_connectivity
from irfuse.mesh.scatter import _inverse


class Connectivity:
    """`conn` (E, K) node numbers of a mesh of `nodes` nodes, checked, with its scatter order
    (`irfuse.mesh.inverse_connectivity`); `seconds`: what preparing it took."""

    def __init__(self, conn, nodes: int):
        if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
            raise UsageError(f"Connectivity: nodes is the mesh's number of nodes, a positive whole number, "
                             f"not {nodes!r}")
        if nodes >= 2**31:
            raise UsageError(f"Connectivity: {nodes} nodes; node numbers are 32-bit, so a mesh has fewer than 2^31")
        start = time.perf_counter()
        checked = check_connectivity(conn, int(nodes))
        if checked.size >= 2**31:
            raise UsageError(f"Connectivity: {checked.size} entries; a scatter adds fewer than 2^31")
        self.conn = np.ascontiguousarray(checked, dtype=np.int32)
        self.conn.flags.writeable = False
        self.nodes = int(nodes)
        self.inverse = _inverse(checked, self.nodes)
        for a in self.inverse:
            a.flags.writeable = False
        self.seconds = time.perf_counter() - start
        self._on_device: dict[int, tuple] = {}  # id(device) -> (device, node numbers, starts, slots)

    def on_device(self, device) -> tuple:
        """(node numbers, its scatter order) as buffers of a runtime device (the order's arrays
        in `ScatterInverse`'s order), uploaded the first time a device asks and kept for its
        later calls (the device kept alive with them)."""
        kept = self._on_device.get(id(device))
        if kept is None:
            kept = self._on_device[id(device)] = (device, device.upload_integers(self.conn),
                                                  tuple(device.upload_integers(a) for a in self.inverse))
        return kept[1], kept[2]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_on_device": {}}  # (device buffers do not travel)

    @property
    def shape(self) -> tuple[int, int]:
        return self.conn.shape  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (f"Connectivity({self.shape[0]} elements of {self.shape[1]} nodes, {self.nodes} nodes; "
                f"prepared in {self.seconds * 1e3:.1f} ms)")
