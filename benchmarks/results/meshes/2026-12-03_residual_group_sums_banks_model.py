"""Model (kept for its record; no GPU): the shared-memory wavefronts of the P1 residual element
kernel's group sums (`cuda_emit.emit_scatter_rows`: float32, blocks of 128 elements, two groups
of 64, the rows `fe` staged at pitch 13 words an element) on a Morton box: for each step of the
partials' loop, the most distinct words a bank serves among a warp's lanes, for the rows' reads
and the members' bytes, and the share of lanes with a slot left.

    python MODEL.py CUBES [PITCH]"""
import numpy as np, sys
from irfuse.mesh import box_tetrahedra, renumber, reorder
from irfuse.mesh.scatter import _partials
cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 16
PITCH = int(sys.argv[2]) if len(sys.argv) > 2 else 13
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
K, G, BY = 4, 64, 128
slots, begins, node_of, per_groups = _partials(conn)
bases = np.concatenate([[0], np.cumsum(per_groups)])
def wf(addrs):
    banks = {}
    for a in addrs:
        banks.setdefault(a % 32, set()).add(a)
    return max((len(v) for v in banks.values()), default=0)
tot = {"rows": 0, "rows_instr": 0, "members": 0, "members_instr": 0, "iters": 0, "useful": 0}
nb = len(conn) // BY
for blk in np.random.default_rng(0).choice(nb, size=min(nb, 200), replace=False):
    g0 = blk * 2
    parts = []  # (group-local base slot, list of group-local member slots, first index in group's member list)
    for g in (g0, g0 + 1):
        for p in range(bases[g], bases[g + 1]):
            mem = slots[begins[p]:begins[p + 1]] - g * G * K + (g - g0) * G * K  # block-local slots
            parts.append((list(mem), begins[p] - g * G * K + (g - g0) * 256))
    for w0 in range(0, len(parts), 32):
        lanes = parts[w0:w0 + 32]
        longest = max(len(m) for m, _ in lanes)
        tot["iters"] += longest; tot["useful"] += sum(len(m) for m, _ in lanes) / 32
        for q in range(longest):
            act = [(m[q], f + q) for m, f in lanes if q < len(m)]
            for c in range(3):
                tot["rows"] += wf([s // 4 * PITCH + s % 4 * 3 + c for s, _ in act]); tot["rows_instr"] += 1
            tot["members"] += wf([(512 + fq) // 4 for _, fq in act]); tot["members_instr"] += 1
print(f"pitch {PITCH}: rows {tot['rows']/tot['rows_instr']:.2f} wavefronts an access, members {tot['members']/tot['members_instr']:.2f};"
      f" lanes busy {tot['useful']/tot['iters']:.2f} of each iteration; partials/element {len(node_of)/len(conn):.2f}")
