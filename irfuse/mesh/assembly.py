"""A sparse matrix over a mesh's nodes from its elements' blocks: the pattern made once per
connectivity, each entry added in a fixed order straight into the CSR values.

Element e's block, shaped (K, D, K, D) (row (a, i), column (b, j)), is added at the node
pair (conn[e, a], conn[e, b]) of a matrix of nodes x D rows and columns numbered node by
node (row n * D + i). The pattern holds every node pair that shares an element and every
node's own pair (so each row has its diagonal, where a Dirichlet condition puts 1), blocks
numbered row by row; in CSR, node row n's D rows each hold its blocks' D columns in turn.

So the CSR values are runs of D: run q holds row n * D + i's entries (j = 0 .. D-1) in one
block (n, m). Element e's block row (a, i) against node b, the D entries (a, i, b, :), adds
into exactly one run; the element's K * D * K such rows (its block as it lies in memory,
read as (K * D * K, D)) are "slots" of a connectivity over the runs, `pairs`.

`irfuse.tangent_matrix` sums each entry where it is computed: one thread owns a node's rows
and adds its elements' block rows into them, element after element (`backend.rows_emit`; the
lists of each node's (element, local node) slots, `node_slots`, are all it keeps besides the
pattern), so each entry's terms are added onto 0 in ascending element order, then the
element's local nodes a and b, the same bits on every run. A program whose element part
that kernel cannot run is assembled by a compiled scatter through `pairs` instead (its fixed
order adds the slots in groups: the same sums to rounding).

`sparse_pattern(conn, nodes, d)` makes it once: `pairs` (E, K * D * K; when first asked
for), the CSR `indptr` and `indices` (int32 while the rows and entries fit, else int64),
`diagonal` (each row's diagonal entry). `assemble(blocks, conn, nodes, fixed)` is the reference in NumPy (a
`scipy.sparse.csr_matrix`), each entry summed in the owner-computes kernel's order. Dirichlet
components (`fixed`: True at a fixed row/column) have their rows and columns zeroed and 1 on
the diagonal.
"""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError


class SparsePattern:
    """The sparsity of a connectivity's matrix of D x D blocks (see the module); `kept`: what
    calls keep with it (the pattern on a GPU, the scatter's prepared connectivity)."""

    def __init__(self, nodes: int, d: int, pairs, indptr: np.ndarray, indices: np.ndarray, diagonal: np.ndarray,
                 conn=None):
        self.nodes, self.d, self._pairs, self._conn = nodes, d, pairs, conn
        self.indptr, self.indices, self.diagonal = indptr, indices, diagonal
        self.kept: dict = {}
        for a in (pairs, indptr, indices, diagonal):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False

    @property
    def pairs(self):
        """The per-slot map (E, K * D * K) onto the runs (see the module): made when first asked
        for (the scatter path and the reference need it; the owner-computes kernel does not)
        and kept."""
        if self._pairs is None:
            self._pairs = sparse_pattern(self._conn, self.nodes, self.d, with_pairs=True)._pairs
            if isinstance(self._pairs, np.ndarray):
                self._pairs.flags.writeable = False
        return self._pairs

    @property
    def shape(self) -> tuple[int, int]:
        return (self.nodes * self.d, self.nodes * self.d)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @property
    def runs(self) -> int:
        """The runs of D values (see the module): what `pairs` numbers."""
        return self.nnz // self.d

    def rows(self) -> np.ndarray:
        """The row of each CSR entry, on the host (made when first asked for: Dirichlet
        conditions)."""
        if "rows" not in self.kept:
            host = self.host()
            self.kept["rows"] = np.repeat(np.arange(self.shape[0], dtype=host.indices.dtype), np.diff(host.indptr))
        return self.kept["rows"]

    def host(self) -> SparsePattern:
        """This pattern with NumPy arrays (itself where they are; else copied once and kept)."""
        if isinstance(self.indices, np.ndarray):
            return self
        if "host" not in self.kept:
            self.kept["host"] = SparsePattern(self.nodes, self.d, *(None if a is None else a.cpu().numpy() for a in (
                self._pairs, self.indptr, self.indices, self.diagonal, self._conn)))
        return self.kept["host"]

    def __repr__(self) -> str:
        return f"SparsePattern({self.shape[0]} x {self.shape[1]}, {self.nnz} entries)"


def sparse_pattern(conn, nodes: int, d: int, with_pairs: bool = False, lists: tuple | None = None) -> SparsePattern:
    """The pattern of `conn`'s (E, K) matrix of D x D blocks over `nodes` nodes (see the
    module); `conn` checked already: a NumPy array, or a PyTorch tensor (on a GPU: the
    pattern made there, its arrays tensors on that GPU, the same entries as the host's).
    `pairs` is made now `with_pairs`, else when first asked for. On the host the compiled
    helper makes them node by node (`irfuse.mesh.native.pattern_blocks`: the same arrays; 663,552
    tets in 1.96 s by the array version below on the 2-core CI machine); from a tensor
    without `pairs`, PyTorch makes them range of nodes by range of nodes from the nodes'
    slots (`lists`, `node_slots`'s, made here where not given; `irfuse.mesh.pattern_ranges`)."""
    if isinstance(conn, np.ndarray):
        from irfuse.mesh import native

        blocks = native.pattern_blocks(conn, nodes)
        if blocks is not None:
            wide = _wide(int(blocks[0][-1]) * d * d, nodes, d)
            pairs = native.pattern_pairs(conn, *blocks, d) if with_pairs else None
            return SparsePattern(nodes, d, pairs, *native.pattern_arrays(*blocks, nodes, d, wide), conn)
    elif not with_pairs:
        from irfuse.mesh import pattern_ranges

        arrays = pattern_ranges.sparse_pattern(conn, nodes, d, lists or node_slots(conn, nodes), _wide)
        return SparsePattern(nodes, d, None, *arrays, conn)
    x = _Arrays(conn)
    e, k = tuple(conn.shape)
    c = x.int64(conn)
    keys = (c[:, :, None] * nodes + c[:, None, :]).reshape(-1)  # (e, a, b): node of a, node of b
    own = x.arange(nodes) * (nodes + 1)
    unique, inverse = x.unique(x.cat(keys, own))
    block_rows, block_cols = unique // nodes, unique % nodes
    starts = x.zeros(nodes + 1)
    starts[1:] = x.cumsum(x.bincount(block_rows, nodes))
    length = starts[1:] - starts[:-1]  # blocks in each node row
    total = len(unique) * d * d
    wide = _wide(total, nodes, d)
    i = x.arange(d)
    # Block p of node row n, row i: run starts[n] * d + i * length[n] + (p - starts[n]).
    first = starts[block_rows] * (d - 1)  # (starts[n] * d - starts[n])
    run = (first + x.arange(len(unique)))[None, :] + i[:, None] * length[block_rows][None, :]  # (d, blocks)
    p = inverse[:len(keys)].reshape(e, k, k)
    pairs = x.index(x.permute(run[:, p], (1, 2, 0, 3)).reshape(e, k * d * k), False) if with_pairs else None
    indices = x.zeros(total)
    indices.reshape(-1, d)[run.reshape(-1)] = (block_cols[None, :] * d + x.zeros(d)[:, None]).reshape(-1)[:, None] + \
        i[None, :]
    indptr = x.zeros(nodes * d + 1)
    indptr[:-1] = (starts[:-1, None] * d * d + i[None, :] * length[:, None] * d).reshape(-1)
    indptr[-1] = total
    own_block = x.searchsorted(unique, own)  # each node's diagonal block
    diagonal = (x.permute(run[:, own_block], (1, 0)) * d + i[None, :]).reshape(-1)  # (node, i): entry i of its run
    return SparsePattern(nodes, d, pairs, x.index(indptr, wide), x.index(indices, wide), x.index(diagonal, wide),
                         conn)


def _wide(total: int, nodes: int, d: int) -> bool:
    """Whether a pattern of `total` entries over `nodes` nodes of D x D blocks takes int64
    indices (int32 while its rows and entries fit); refused where its runs of D would not
    fit in 32 bits (the per-slot map numbers them so)."""
    if total // d >= 2**31:
        raise UsageError(f"a sparse matrix of {total} entries: its runs of {d} are numbered in 32 bits")
    return not (nodes * d < 2**31 and total < 2**31)


def slots_key(device) -> tuple:
    """The key a `Connectivity` keeps its `node_slots` under (`kept`), where they were made:
    None for the host, else the device (a PyTorch device or its name)."""
    return ("node slots", "host" if device is None else str(device))


def node_slots(conn, nodes: int) -> tuple:
    """Each node's (element, local node) slots, e * K + a, in ascending order (so ascending
    elements): `starts` (N + 1, int64; node n's slots are `slots[starts[n]:starts[n + 1]]`)
    and `slots` (E * K, int32), for the owner-computes assembly (`backend.rows_emit`). `conn`
    checked already: a NumPy array, or a PyTorch tensor (made where it lives, range of nodes
    by range of nodes: `irfuse.mesh.pattern_ranges`; the same lists as the host's)."""
    if int(np.prod(tuple(conn.shape), dtype=np.int64)) >= 2**31:
        raise UsageError(f"a connectivity of {tuple(conn.shape)}: its slots are numbered in 32 bits")
    if not isinstance(conn, np.ndarray):
        from irfuse.mesh import pattern_ranges

        return pattern_ranges.node_slots(conn, nodes)
    flat = conn.astype(np.int64).reshape(-1)
    starts = np.zeros(nodes + 1, np.int64)
    starts[1:] = np.cumsum(np.bincount(flat, minlength=nodes))
    return starts, np.argsort(flat, kind="stable").astype(np.int32)


class _Arrays:
    """What `sparse_pattern` asks of NumPy and of PyTorch (its tensors' device), alike."""

    def __init__(self, like):
        self.torch = None if isinstance(like, np.ndarray) else __import__("torch")
        self.device = None if self.torch is None else like.device

    def int64(self, a):
        return a.astype(np.int64) if self.torch is None else a.to(self.torch.int64)

    def arange(self, n: int):
        return np.arange(n, dtype=np.int64) if self.torch is None else self.torch.arange(
            n, dtype=self.torch.int64, device=self.device)

    def zeros(self, n: int):
        return np.zeros(n, dtype=np.int64) if self.torch is None else self.torch.zeros(
            n, dtype=self.torch.int64, device=self.device)

    def cat(self, a, b):
        return np.concatenate([a, b]) if self.torch is None else self.torch.cat([a, b])

    def unique(self, a):
        if self.torch is None:
            return np.unique(a, return_inverse=True)
        return self.torch.unique(a, sorted=True, return_inverse=True)

    def bincount(self, a, n: int):
        return np.bincount(a, minlength=n) if self.torch is None else self.torch.bincount(a, minlength=n)

    def cumsum(self, a):
        return np.cumsum(a) if self.torch is None else self.torch.cumsum(a, 0)

    def searchsorted(self, a, v):
        return np.searchsorted(a, v) if self.torch is None else self.torch.searchsorted(a, v)

    def permute(self, a, axes):
        return a.transpose(axes) if self.torch is None else a.permute(*axes)

    def index(self, a, wide: bool):
        """`a` as index words: int64 where `wide`, else int32."""
        if self.torch is None:
            return np.ascontiguousarray(a, dtype=np.int64 if wide else np.int32)
        return a.to(self.torch.int64 if wide else self.torch.int32).contiguous()


def check_blocks(blocks, conn_shape: tuple[int, int], who: str = "assemble") -> int:
    """D of element blocks shaped (E, K, D, K, D) for a connectivity of that (E, K), else refused."""
    e, k = conn_shape
    s = tuple(blocks.shape)
    if len(s) != 5 or s[:2] != (e, k) or s[3] != k or s[2] != s[4]:
        raise UsageError(f"{who}: blocks shaped {s}; a connectivity of {e} elements of {k} nodes takes "
                         f"(E, K, D, K, D) = ({e}, {k}, D, {k}, D)")
    return int(s[2])


def assemble(blocks: np.ndarray, conn: np.ndarray, nodes: int, fixed: np.ndarray | None = None):
    """The CSR matrix of the elements' blocks, in NumPy (the reference; see the module)."""
    try:
        from scipy import sparse
    except ImportError:
        raise UsageError("a sparse matrix is returned as SciPy's: install scipy") from None
    from irfuse.mesh.order import check_connectivity

    blocks = np.asarray(blocks)
    conn = check_connectivity(conn, nodes)
    d = check_blocks(blocks, conn.shape)
    pattern = sparse_pattern(conn, nodes, d)
    data = in_element_order(slot_rows(blocks), pattern.pairs, pattern.runs).reshape(-1)
    if fixed is not None:
        mask = np.asarray(fixed, bool).reshape(-1)
        if mask.size != nodes * d:
            raise UsageError(f"assemble: fixed= has {mask.size} entries; the matrix has {nodes * d} rows")
        apply_fixed(data, pattern, mask)
    return sparse.csr_matrix((data, pattern.indices.copy(), pattern.indptr.copy()), shape=pattern.shape)


def in_element_order(rows: np.ndarray, pairs: np.ndarray, runs: int) -> np.ndarray:
    """The runs' sums (runs, D) of slot rows (E, K * D * K, D) through `pairs`, each run's
    terms added one after another onto 0 in ascending slot order: ascending element e, then
    its local node a, then b (the order of the owner-computes kernel, `backend.rows_emit`)."""
    flat = pairs.reshape(-1)
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=runs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    terms = rows.reshape(len(flat), -1)
    out = np.zeros((runs, terms.shape[1]), terms.dtype)
    for j in range(int(counts.max()) if len(counts) else 0):
        has = counts > j
        out[has] += terms[order[starts[has] + j]]
    return out


def slot_rows(blocks):
    """Element blocks (E, K, D, K, D) as the scatter's slots (E, K * D * K, D): a view."""
    e, k, d = blocks.shape[:3]
    return blocks.reshape(e, k * d * k, d)


def apply_fixed(data: np.ndarray, pattern: SparsePattern, mask: np.ndarray) -> None:
    """Dirichlet rows and columns (`mask`: True at a fixed row) in CSR values `data`, in place:
    0 off the diagonal, 1 on it."""
    data[mask[pattern.rows()] | mask[pattern.indices]] = 0
    data[pattern.diagonal[mask]] = 1
