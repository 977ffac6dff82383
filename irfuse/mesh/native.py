"""A mesh's preparation on the host in compiled code (`native.cpp`): a connectivity's scatter
order in one pass over its entries, a Morton `reorder` by radix sorts, linear where the
array versions sort, `renumber`'s connectivity in one checked pass, and a tangent's sparse
pattern node by node.

The source is built once per compiler by the host C++ compiler the CPU backend uses
(`irfuse.artifact.host_toolchain`; `CXX`), kept in irfuse's cache beside the CPU backend's
libraries, and loaded with ctypes. Where no compiler is at hand, or the build or the cache
fails, each function answers None and the caller takes the array versions
(`irfuse.mesh.on_gpu.inverse_on_host`, `irfuse.mesh.scatter._inverse`; `morton_on_host`,
`irfuse.mesh.order`): the same arrays, entry for entry (tests/test_mesh.py compares them on
random connectivities and coordinates).
`IRFUSE_MESH_NATIVE=0` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from importlib import resources

import numpy as np

from irfuse.artifact.disk_cache import cache_lock, entry_path, read_checked, sha256, write_checked
from irfuse.artifact.scatter_groups import GROUP_SLOTS
from irfuse.artifact.host_toolchain import compiler, run_compiler
from irfuse.diagnostics import IrfuseError

SOURCE = "native.cpp"
SWITCH = "IRFUSE_MESH_NATIVE"  # "0": the array versions only
FLAGS = ["-O2", "-ffp-contract=off", "-shared", "-fPIC", "-w"]  # (the keys' scaling as NumPy rounds it)
_LIBRARY: list = []  # [the loaded library, or None where it cannot be had]: loaded once a process


def scatter_order(conn: np.ndarray, nodes: int, per_group: int) -> tuple | None:
    """The arrays of `irfuse.mesh.ScatterInverse` (starts, partials, members, firsts, bases) of
    a checked int32 connectivity `conn` (E, K) in groups of `per_group` slots, or None where
    the compiled helper cannot be had or the slots are numbered in two bytes (it writes one:
    past `GROUP_SLOTS` the array versions make the order)."""
    if per_group > GROUP_SLOTS:
        return None
    library = _library()
    if library is None:
        return None
    flat = np.ascontiguousarray(conn, dtype=np.int32).reshape(-1)
    n = flat.size
    groups = -(-n // per_group)
    starts = np.empty(nodes + 1, np.int64)
    partials = np.empty(max(n, 1), np.int32)
    members = np.empty(n, np.uint8)
    firsts = np.empty(max(n, 1), np.uint8)
    bases = np.empty(groups + 1, np.int32)
    count = library.irf_scatter_order(_at(flat), n, nodes, per_group, _at(starts), _at(partials), _at(members),
                                      _at(firsts), _at(bases))
    if count < 0:
        raise MemoryError(f"the scatter order of {n} connectivity entries and {nodes} nodes: no scratch memory")
    return starts, partials[:count].copy(), members, firsts[:count].copy(), bases


def morton_order(coords: np.ndarray) -> np.ndarray | None:
    """`irfuse.mesh.order._morton_order` of checked finite coordinates (M, D), D at most 3
    (int64), or None where the compiled helper cannot be had."""
    library = _library()
    if library is None:
        return None
    c = np.ascontiguousarray(coords, dtype=np.float64)
    order = np.empty(len(c), np.int64)
    if library.irf_morton_order(_at(c), len(c), c.shape[1], _at(order)) < 0:
        raise MemoryError(f"a Morton order of {len(c)} nodes: no scratch memory")
    return order


def element_order(conn: np.ndarray, node_order: np.ndarray, nodes: int) -> np.ndarray | None:
    """The elements of a checked connectivity (E, K) by their new node numbers sorted, lowest
    first (`reorder`'s `np.lexsort` order), or None where the compiled helper cannot be had."""
    library = _library()
    if library is None:
        return None
    c = np.ascontiguousarray(conn, dtype=np.int32)
    node_order = np.ascontiguousarray(node_order, dtype=np.int64)
    order = np.empty(len(c), np.int64)
    if library.irf_element_order(_at(c), len(c), c.shape[1], _at(node_order), nodes, _at(order)) < 0:
        raise MemoryError(f"the element order of {len(c)} elements: no scratch memory")
    return order


def renumbered(conn: np.ndarray, node_order, element_order) -> np.ndarray | None:
    """`irfuse.mesh.renumber`'s connectivity of a checked int32 `conn` (E, K): the rows in
    `element_order`, each entry's new number by `node_order`; None where the compiled helper
    cannot be had, or where an order is not a permutation (the caller says which, by name)."""
    library = _library()
    if library is None:
        return None
    c = np.ascontiguousarray(conn, dtype=np.int32)
    nodes_order = np.asarray(node_order)
    elements_order = np.asarray(element_order)
    if nodes_order.ndim != 1 or elements_order.ndim != 1 or len(elements_order) != len(c):
        return None
    if nodes_order.dtype.kind not in "iu" or elements_order.dtype.kind not in "iu":
        return None
    nodes_order = np.ascontiguousarray(nodes_order, dtype=np.int64)
    elements_order = np.ascontiguousarray(elements_order, dtype=np.int64)
    out = np.empty_like(c)
    made = library.irf_renumber(_at(c), len(c), c.shape[1], _at(nodes_order), len(nodes_order),
                                _at(elements_order), _at(out))
    if made == -1:
        raise MemoryError(f"renumbering {len(c)} elements: no scratch memory")
    return out if made == 0 else None


def pattern_blocks(conn: np.ndarray, nodes: int) -> tuple | None:
    """Each node's blocks of a checked connectivity (E, K): `starts` (N + 1, int64) and `cols`
    (the nodes it shares an element with and itself, ascending, node after node), or None
    where the compiled helper cannot be had (see native.cpp); the rest of
    `irfuse.mesh.assembly.sparse_pattern`'s arrays from them by `pattern_arrays` and
    `pattern_pairs`."""
    library = _library()
    if library is None:
        return None
    c = np.ascontiguousarray(conn, dtype=np.int32)
    e, k = c.shape
    starts = np.empty(nodes + 1, np.int64)
    cols = np.empty(max(min(nodes * nodes, nodes + e * k * (k - 1)), 1), np.int32)  # (at most, each node's own)
    blocks = library.irf_pattern_blocks(_at(c), e, k, nodes, _at(starts), _at(cols), len(cols))
    if blocks == -1:
        raise MemoryError(f"the sparse pattern of {e} elements: no scratch memory")
    return (starts, cols[:blocks]) if blocks >= 0 else None


def pattern_arrays(starts: np.ndarray, cols: np.ndarray, nodes: int, d: int, wide: bool) -> tuple:
    """(indptr, indices, diagonal) of D x D blocks laid out as the array version lays them
    out, int64 where `wide`, else int32."""
    index = np.int64 if wide else np.int32
    total = int(starts[-1]) * d * d
    indptr, indices, diagonal = np.empty(nodes * d + 1, index), np.empty(total, index), np.empty(nodes * d, index)
    _library().irf_pattern_arrays(_at(starts), _at(cols), nodes, d, int(wide), _at(indptr), _at(indices),
                                  _at(diagonal))
    return indptr, indices, diagonal


def pattern_pairs(conn: np.ndarray, starts: np.ndarray, cols: np.ndarray, d: int) -> np.ndarray:
    """The per-slot map (E, K * D * K) of the pattern's runs (see `irfuse.mesh.assembly`)."""
    c = np.ascontiguousarray(conn, dtype=np.int32)
    e, k = c.shape
    pairs = np.empty((e, k * d * k), np.int32)
    _library().irf_pattern_pairs(_at(c), e, k, _at(starts), _at(cols), d, _at(pairs))
    return pairs


def _at(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _library():
    if os.environ.get(SWITCH, "1").strip() == "0":  # (read at every call: a switch, not a setting)
        return None
    if not _LIBRARY:
        _LIBRARY.append(_load())
    return _LIBRARY[0]


def _load():
    """The built helper, loaded (None where it cannot be built, stored or loaded)."""
    text = resources.files("irfuse.mesh").joinpath(SOURCE).read_text()
    try:
        cxx = compiler()
        key = sha256("\0".join([text, *cxx, *FLAGS]).encode())
        path = entry_path("host", key, ".so")
        with cache_lock(path):
            if read_checked(path) is None:
                data = _build(text, cxx)
                if data is None or not write_checked(path, data):
                    return None
        library = ctypes.CDLL(path)
    except (IrfuseError, OSError):
        return None
    word, size, at = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
    for name, result, args in (("irf_scatter_order", size, [at, size, size, word] + [at] * 5),
                               ("irf_morton_order", word, [at, size, word, at]),
                               ("irf_element_order", word, [at, size, word, at, size, at]),
                               ("irf_renumber", word, [at, size, word, at, size, at, at]),
                               ("irf_pattern_blocks", size, [at, size, word, size, at, at, size]),
                               ("irf_pattern_arrays", None, [at, at, size, word, word, at, at, at]),
                               ("irf_pattern_pairs", None, [at, size, word, at, at, word, at])):
        getattr(library, name).restype = result
        getattr(library, name).argtypes = args
    return library


def _build(text: str, cxx: list[str]) -> bytes | None:
    with tempfile.TemporaryDirectory(prefix="irfuse-mesh-") as tmp:
        source, out = os.path.join(tmp, SOURCE), os.path.join(tmp, "native.so")
        with open(source, "w") as f:
            f.write(text)
        if run_compiler([*cxx, *FLAGS, source, "-o", out], cxx).returncode != 0 or not os.path.isfile(out):
            return None
        with open(out, "rb") as f:
            return f.read()
