"""Model (kept for its record; no GPU): the shared-memory wavefronts a warp instruction of the
P1 tangent's rounds kernel (`backend/rows_emit._rounds_kernel`, float32, 32 nodes a block)
takes on a Morton box, as laid out before the change of 2026-12-03 (the nodes' rows as in the
values; each slot's staged rows at stride 37) and with each thread's row at stride 96 (word w
of thread t's row at w * 96 + t): a wavefront for each distinct word a bank serves, the most
over the banks, summed over the adds of 60 random blocks.

    python MODEL.py CUBES      (prints the wavefronts an access: the rows' adds, the staged
                                rows' reads, and the adds with each thread's row at stride 96)"""
import numpy as np, sys
from irfuse.mesh import box_tetrahedra, renumber, reorder
from irfuse.mesh.assembly import sparse_pattern, node_slots
cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 16
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
N = len(X); K = 4; D = 3; NODES = 32; NT = 96; STRIDE = 37
p = sparse_pattern(conn, N, D)
indptr, indices = np.asarray(p.indptr), np.asarray(p.indices)
starts, slots = node_slots(conn, N)
flat = conn.reshape(-1)
def places(n, s):
    base = indptr[n * D]; blocks = (indptr[n * D + 1] - base) // D
    cols = indices[base:base + blocks * D:D]
    e = slots[s] // K
    return [int(np.searchsorted(cols, conn[e, b] * D)) for b in range(K)]

def wavefronts(addrs):
    """addrs: list of word addresses of active lanes (None inactive) -> wavefronts (distinct addresses per bank, max)."""
    banks = {}
    for a in addrs:
        if a is None: continue
        banks.setdefault(a % 32, set()).add(a)
    return max((len(v) for v in banks.values()), default=0)

tot = {"rmw": 0, "part": 0, "at": 0, "rmw_instr": 0, "part_instr": 0}
tot_t = {"rmw": 0}
blocks = (N + NODES - 1) // NODES
rng = np.random.default_rng(0)
for blk in rng.choice(blocks, size=min(blocks, 60), replace=False):
    first = blk * NODES; count = min(NODES, N - first)
    begin = indptr[first * D]
    frm = [indptr[(first + y) * D] - begin for y in range(count + 1)]
    fs = [starts[first + y] for y in range(count + 1)]
    most = max(fs[y + 1] - fs[y] for y in range(count))
    width = [(frm[y + 1] - frm[y]) // D for y in range(count)]
    for r0 in range(0, most, D):
        pl = {}
        for y in range(count):
            for x in range(D):
                s = fs[y] + r0 + x
                if s < fs[y + 1]:
                    pl[(y, x)] = places(first + y, s)
        for w0 in range(0, NT, 32):  # warps
            lanes = [(t // D, t % D) for t in range(w0, w0 + 32)]
            for q in range(D):
                for b in range(K):
                    act = []
                    for (y, x) in lanes:
                        if y < count and (y, q) in pl:
                            act.append((y, x))
                    if not act: continue
                    for j in range(D):
                        rm = [frm[y] + x * width[y] + pl[(y, q)][b] * D + j for (y, x) in act]
                        wf = wavefronts(rm); tot["rmw"] += 2 * wf; tot["rmw_instr"] += 2
                        # transposed layout: (place*3+j)*96 + tid
                        tr = [(pl[(y, q)][b] * D + j) * NT + y * D + x for (y, x) in act]
                        tot_t["rmw"] += 2 * wavefronts(tr)
                        pa = [(y * D + q) * STRIDE + x * 12 + b * 3 + j for (y, x) in act]
                        tot["part"] += wavefronts(pa); tot["part_instr"] += 1
                    at = [(y * D + q) * 4 + b for (y, x) in act]
                    tot["at"] += wavefronts(at)
print(cubes, "cubes;", tot, "transposed rmw", tot_t)
print("rmw conflict factor %.2f, part %.2f; transposed rmw %.2f" % (tot["rmw"] / tot["rmw_instr"], tot["part"] / tot["part_instr"], tot_t["rmw"] / tot["rmw_instr"]))
