"""Probe forms of J2's consistent tangent kernel (a rewrite of its emitted CUDA, for
2026-12-02_j2_tangent_blocks_probe.py): `fold` (the nine unit seeds as constant arrays, their
building in shared memory removed), `stage` (sig staged and stored before the directions, each
direction's column written to the tangent's staging as it is made), `:N` (N resident blocks asked)."""
import re



def kernel_span(source: str, name: str):
    start = source.index('extern "C" __global__ void __launch_bounds__(')
    while name not in source[start:start + 300]:
        start = source.index('extern "C" __global__ void __launch_bounds__(', start + 10)
    end = source.index("#elif defined(IRFUSE_CPU_LOOP)", start)
    return start, end


def fold(body: str) -> str:
    """The unit seeds of the nine directions as constant arrays (their building in shared
    memory removed), read by the directions' first steps."""
    first_seed = body.index("  // store into ep\n")
    first_seed = body.index("__syncthreads();\n", first_seed) + len("__syncthreads();\n")
    last = body.index("  // stack_3_3x3x3_3x3x3_3x3x3[elem] into reg\n")
    head, mid, tail = body[:first_seed], body[first_seed:last], body[last:]
    lines = mid.splitlines(keepends=True)
    out, d = [], -1
    for ln in lines:
        if re.match(r"  if \(active\) irf_(zeros|item|put)_\w+_elem_\w+\(", ln) or ln.strip() == "__syncthreads();":
            continue
        m = re.match(r"  if \(active\) (irf_jvp_1__(dev|trace)_3x3_elem_sr)\(tx, ty, smem \+ \d+, (\w+)\);\n", ln)
        if m:
            if m.group(2) == "dev":
                d += 1
            ln = f"  if (active) {m.group(1)}(0, 0, irf_seed{d}, {m.group(3)});\n"
        out.append(ln)
    assert d == 8, d
    seeds = "".join("  const real_t irf_seed%d[9] = {%s};\n" % (k, ", ".join("(real_t)1" if q == k else "(real_t)0" for q in range(9)))
                    for k in range(9))
    head = head.replace("  const bool active = ty < count;\n", "  const bool active = ty < count;\n" + seeds, 1)
    return head + "".join(out) + tail


def stage(body: str) -> str:
    """sig staged and stored before the directions, each direction's column written to the
    tangent's staging as it is made (the stacks and the permutation removed)."""
    sig = re.search(r"  // add_3x3_3x3\[elem\] into shared\[0\]\n  if \(active\) irf_add_3x3_3x3_elem_rrs\(tx, ty, (\w+), (\w+), smem \+ 0\);\n"
                    r"  __syncthreads\(\);\n  // store into sig\n  irf_copy16\(g_sig_1 \+ first \* 9, smem \+ 0, count \* 9, tid, (\d+)\);\n  __syncthreads\(\);\n", body)
    body = body.replace(sig.group(0), "")
    small = re.findall(r"  if \(active\) irf_stack_3_3x3_3x3_3x3_elem_rrrr\(tx, ty, (\w+), (\w+), (\w+), (\w+)\);\n", body)
    big = re.search(r"  if \(active\) irf_stack_3_3x3x3_3x3x3_3x3x3_elem_rrrr\(tx, ty, (\w+), (\w+), (\w+), (\w+)\);\n", body)
    parts = {out: [a, b, c] for a, b, c, out in small}
    order = [d for v in big.groups()[:3] for d in parts[v]]
    for a, b, c, out in small:
        body = body.replace(f"  if (active) irf_stack_3_3x3_3x3_3x3_elem_rrrr(tx, ty, {a}, {b}, {c}, {out});\n", "")
    body = body.replace(big.group(0), "")
    body = re.sub(r"  // contract_mnij_ijmn_3x3x3x3\[elem\] into shared\[0\]\n  if \(active\) irf_contract_mnij_ijmn_3x3x3x3_elem_rs\(tx, ty, \w+, smem \+ 0\);\n", "", body)
    for k, col in enumerate(order):
        m = re.search(rf"  if \(active\) irf_jvp_11__add_3x3_3x3_elem_rrr\(tx, ty, \w+, \w+, {col}\);\n", body)
        body = body.replace(m.group(0), m.group(0) + f"  if (active) {{ for (int q = 0; q < 9; ++q) smem[ty * 81 + q * 9 + {k}] = {col}[q]; }}\n")
    at = body.index("  // store into ep\n")
    at = body.index("__syncthreads();\n", at) + len("__syncthreads();\n")
    return body[:at] + sig.group(0) + body[at:]


def transform(source: str, variant: str, name: str = "j2_return_jacobian_k0") -> str:
    start, end = kernel_span(source, name)
    body = source[start:end]
    if "fold" in variant:
        body = fold(body)
    if "stage" in variant:
        body = stage(body)
    m = re.search(r":(\d+)$", variant)
    if m:
        body = re.sub(r"__launch_bounds__\((\d+), \d+\)", rf"__launch_bounds__(\1, {m.group(1)})", body, count=1)
    return source[:start] + body + source[end:]
