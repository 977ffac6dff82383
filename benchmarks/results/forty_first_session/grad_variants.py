"""Where the mesh gradient's time goes: the Neo-Hookean energy's `derivative grad of E wrt u`
on the 128^3 Morton mesh (12,582,912 tetrahedra, float32), whole runs timed (medians of 30,
interleaved rounds), with its CUDA source rewritten as text into probes (not kept in irfuse):

  grad          the source as emitted
  energy        the energy alone (the program without its derivative line)
  nosum         the element kernel without its partials' sums and stores (wrong results; NVRTC
                then drops the rows' shared array and the reverse sweep that fills it)
  norev         without the reverse sweep: F itself as the rows' factor (wrong results)
  noscatter     the scatter kernel returning at once (wrong results)
  noloop        each partial its first slot's row only (wrong results)
  nostore       the partials summed but not stored (wrong results)
  mshared, mshared_all, pre, preall
                the block's members, bases (and firsts) copied into shared memory at the start,
                or loaded into registers at the start and stored there before the rows' barrier
  b4, b8        the slot loop taking 4 or 8 slots at a time (members, rows, then additions)
  u1, u2        the slot loop unrolled once or twice (NVRTC unrolls it four times)
  pad4          the rows four words a slot, stored and read as 16-byte vectors
  bylen         each group's partials numbered longest first (a reordered scatter order)
  lb9, lb10, lb12, energy_lb10, energy_lb12
                the element kernel's launch bounds asking for that many blocks of 128 threads
Every variant that keeps the sums is checked against `grad` (energy_*: `energy`) bit for bit.
NCU=1: one run of each, no timing (for Nsight Compute); OLD=DIR: an older tree's irfuse.

    python grad_variants.py [variant ...]
"""
import copy
import os
import re
import sys

import numpy as np

if os.environ.get("OLD"):  # an older tree's irfuse package (`git archive REV irfuse | tar -x -C DIR`)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, os.environ["OLD"])
import irfuse
import irfuse.mesh as mesh
from irfuse.runtime.executor import Executor, open_device

def element_kernel_span(text):
    """(start, end) of the GPU body of the gradient's element kernel."""
    m = re.search(r'extern "C" __global__ void __launch_bounds__\(\d+(, \d+)?\) \w+_grad_k0_\w+\(', text)
    end = text.index("\n#else", m.start())
    return m.start(), end


def nosum(text):
    a, b = element_kernel_span(text)
    body = text[a:b]
    i = body.index("  // the rows of grad_ue into grad_ue")
    return text[:a] + body[:i] + "}" + text[b:]


def norev(text):
    a, b = element_kernel_span(text)
    body = text[a:b]
    i = body.index("  // zeros_s[elem] into reg")
    j = body.index("  // vjp_0__mtmul_4x3_4x3[elem] into shared")
    rest = body[j:].replace("r_G, r_grad_F_5,", "r_G, r_F_1,", 1)
    return text[:a] + body[:i] + rest + text[b:]


def noscatter(text):
    out = text
    for name in ("irf_scatter_3(", "irf_scatter_onto_3("):
        i = out.index('__global__ void __launch_bounds__(128) ' + name)
        k = out.index("{", i)
        out = out[:k + 1] + "\n  return;" + out[k + 1:]
    return out


def mshared(text):
    a, b = element_kernel_span(text)
    body = text[a:b]
    load = ("  __shared__ unsigned irf_ms[128];\n  __shared__ int irf_bs[3];\n"
            "  if (irf_members0 != nullptr) {\n"
            "    if (tid < count) irf_ms[tid] = reinterpret_cast<const unsigned*>(irf_members0 + (first / 64) * 256)[tid];\n"
            "    if (tid <= (count + 63) / 64) irf_bs[tid] = irf_bases0[first / 64 + tid];\n  }\n")
    k = body.index("  __syncthreads();")  # the uniform copies' barrier
    body = body[:k] + load + body[k:]
    body = body.replace("irf_bases0[irf_g0 + irf_g + 1]", "irf_bs[irf_g + 1]")
    body = body.replace("irf_bases0[irf_g0 + irf_groups]", "irf_bs[irf_groups]")
    body = body.replace("irf_bases0[irf_g0]", "irf_bs[0]")
    body = body.replace("const unsigned char* const irf_m = irf_members0 + (irf_g0 + irf_g) * 256;",
                        "const unsigned char* const irf_m = reinterpret_cast<const unsigned char*>(irf_ms) + irf_g * 256;")
    assert "irf_bases0[" not in body.split("// the rows of grad_ue")[1]
    return text[:a] + body + text[b:]


def mshared_all(text):
    """mshared, and the block's partials' firsts copied into shared memory after the uniform
    copies' barrier (their loads in flight while the element code runs)."""
    text = mshared(text)
    a, b = element_kernel_span(text)
    body = text[a:b]
    body = body.replace("  __shared__ int irf_bs[3];\n", "  __shared__ int irf_bs[3];\n  __shared__ unsigned char irf_fs[512];\n", 1)
    k = body.index("  __syncthreads();") + len("  __syncthreads();\n")
    body = body[:k] + ("  if (irf_members0 != nullptr) { const int p0 = irf_bs[0], np = irf_bs[(count + 63) / 64] - p0;\n"
                       "    for (int i = tid; i < np; i += 128) irf_fs[i] = irf_firsts0[p0 + i]; }\n") + body[k:]
    body = body.replace("irf_firsts0[irf_p + 1]", "irf_fs[irf_p + 1 - irf_p0]").replace("irf_firsts0[irf_p]", "irf_fs[irf_p - irf_p0]")
    return text[:a] + body + text[b:]


def noloop(text):
    return text.replace("for (int irf_q = irf_m0 + 1; irf_q < irf_m1; ++irf_q) {", "for (int irf_q = irf_m0 + 1; irf_q < irf_m0 + 1; ++irf_q) {")


def nostore(text):
    return text.replace("g_grad_ue[irf_p * 3 + irf_c] = irf_acc[irf_c];",
                        "if (irf_acc[irf_c] == (real_t)1.2345e-30f) g_grad_ue[irf_p * 3 + irf_c] = irf_acc[irf_c];")


LOOP = ("      for (int irf_q = irf_m0 + 1; irf_q < irf_m1; ++irf_q) {\n"
        "        for (int irf_c = 0; irf_c < 3; ++irf_c) irf_acc[irf_c] += smem[0 + (irf_b + irf_m[irf_q]) / 4 * 13 + (irf_b + irf_m[irf_q]) % 4 * 3 + irf_c];\n"
        "      }\n")


def batched(width):
    """The slot loop taking `width` slots at a time: their members, then their rows, then the
    additions in slot order (the same sums)."""
    def rewrite(text):
        assert LOOP in text
        new = (f"      for (int irf_q0 = irf_m0 + 1; irf_q0 < irf_m1; irf_q0 += {width}) {{\n"
               f"        int irf_s[{width}];\n"
               f"        IRF_UNROLL for (int irf_j = 0; irf_j < {width}; ++irf_j) irf_s[irf_j] = irf_q0 + irf_j < irf_m1 ? irf_b + irf_m[irf_q0 + irf_j] : -1;\n"
               f"        real_t irf_r[{width}][3];\n"
               f"        IRF_UNROLL for (int irf_j = 0; irf_j < {width}; ++irf_j) if (irf_s[irf_j] >= 0) {{ IRF_UNROLL for (int irf_c = 0; irf_c < 3; ++irf_c) irf_r[irf_j][irf_c] = smem[0 + irf_s[irf_j] / 4 * 13 + irf_s[irf_j] % 4 * 3 + irf_c]; }}\n"
               f"        IRF_UNROLL for (int irf_j = 0; irf_j < {width}; ++irf_j) if (irf_s[irf_j] >= 0) {{ IRF_UNROLL for (int irf_c = 0; irf_c < 3; ++irf_c) irf_acc[irf_c] += irf_r[irf_j][irf_c]; }}\n"
               "      }\n")
        return text.replace(LOOP, new)
    return rewrite


def pre(text, firsts=False):
    """The block's members and bases (and with `firsts` its partials' firsts) loaded into
    registers as the kernel starts, stored into shared memory before the rows' barrier."""
    a, b = element_kernel_span(text)
    body = text[a:b]
    start = "  (void)tid; (void)active;\n"
    early = ("  unsigned irf_pm = 0; int irf_pb = 0;\n"
             "  if (irf_members0 != nullptr) {\n"
             "    if (tid < count) irf_pm = reinterpret_cast<const unsigned*>(irf_members0 + first * 4)[tid];\n"
             "    if (tid <= (count + 63) / 64) irf_pb = irf_bases0[first / 64 + tid];\n  }\n")
    if firsts:
        early += ("  unsigned char irf_pf0 = 0, irf_pf1 = 0;\n"
                  "  if (irf_members0 != nullptr) {\n"
                  "    const int pp0 = irf_bases0[first / 64], pp1 = irf_bases0[first / 64 + (count + 63) / 64];\n"
                  "    if (pp0 + tid < pp1) irf_pf0 = irf_firsts0[pp0 + tid];\n"
                  "    if (pp0 + tid + 128 < pp1) irf_pf1 = irf_firsts0[pp0 + tid + 128];\n  }\n")
    body = body.replace(start, start + early, 1)
    bar = "  __syncthreads();\n  // the rows of grad_ue"
    late = ("  __shared__ unsigned irf_ms[128];\n  __shared__ int irf_bs[3];\n"
            + ("  __shared__ unsigned char irf_fs[256];\n" if firsts else "")
            + "  if (irf_members0 != nullptr) { irf_ms[tid] = irf_pm; if (tid < 3) irf_bs[tid] = irf_pb;"
            + (" irf_fs[tid] = irf_pf0; irf_fs[tid + 128] = irf_pf1;" if firsts else "") + " }\n")
    assert bar in body
    body = body.replace(bar, late + bar, 1)
    tail = body.index("  // the rows of grad_ue")
    head, rest = body[:tail], body[tail:]
    rest = rest.replace("irf_bases0[irf_g0 + irf_g + 1]", "irf_bs[irf_g + 1]")
    rest = rest.replace("irf_bases0[irf_g0 + irf_groups]", "irf_bs[irf_groups]")
    rest = rest.replace("irf_bases0[irf_g0]", "irf_bs[0]")
    rest = rest.replace("const unsigned char* const irf_m = irf_members0 + (irf_g0 + irf_g) * 256;",
                        "const unsigned char* const irf_m = reinterpret_cast<const unsigned char*>(irf_ms) + irf_g * 256;")
    if firsts:
        rest = rest.replace("irf_firsts0[irf_p + 1]", "(irf_i + 1 < 256 ? irf_fs[irf_i + 1] : irf_firsts0[irf_p + 1])")
        rest = rest.replace("irf_firsts0[irf_p]", "(irf_i < 256 ? irf_fs[irf_i] : irf_firsts0[irf_p])")
    assert "irf_bases0[" not in rest and "irf_members0 +" not in rest
    return text[:a] + head + rest + text[b:]


def pad4(text):
    """The rows of grad_ue in shared memory four words a slot (an element's 16), stored and
    read as 16-byte vectors."""
    fn = "irf_vjp_0__mtmul_4x3_4x3_elem_rrs(int tx, int ty"
    i = text.index(fn)
    j = text.index("\n}\n", i)
    f = text[i:j]
    stores = "".join(f"  reinterpret_cast<float4*>(irf_result + ty*15)[{a}] = make_float4(r{3*a}, r{3*a+1}, r{3*a+2}, 0.0f);\n"
                     for a in range(4))
    k = f.index("  irf_result[ty*12] = r0;")
    f = f[:k] + stores
    text = text[:i] + f + text[j:]
    a, b = element_kernel_span(text)
    body = text[a:b].replace("IRFUSE_SHARED_STATIC(real_t, smem, 1664);", "IRFUSE_SHARED_STATIC(real_t, smem, 2048);")
    body = re.sub(r"for \(int irf_c = 0; irf_c < 3; \+\+irf_c\) irf_acc\[irf_c\] (\+?)= smem\[0 \+ \((irf_b \+ irf_m\[irf_\w+\])\) / 4 \* 13 \+ \(irf_b \+ irf_m\[irf_\w+\]\) % 4 \* 3 \+ irf_c\];",
                  lambda m: ("{ const float4 irf_v = reinterpret_cast<const float4*>(smem)[" + m.group(2) + "]; "
                             + " ".join(f"irf_acc[{c}] {m.group(1)}= irf_v.{x};" for c, x in enumerate("xyz")) + " }"), body)
    assert body.count("const float4 irf_v") == 2, body[-2500:]
    return text[:a] + body + text[b:]


def unroll(text, factor):
    """The slot loop unrolled `factor` times (1: not at all), where NVRTC chose for itself."""
    head = "      for (int irf_q = irf_m0 + 1; irf_q < irf_m1; ++irf_q) {"
    assert text.count(head) == 2  # (the GPU kernel's and the CPU twin's)
    a, b = element_kernel_span(text)
    return text[:a] + text[a:b].replace(head, f'      _Pragma("unroll {factor}")\n' + head) + text[b:]


def by_length(inv, k=4):
    """The scatter order with each group's partials numbered longest first (the same sums: a
    node's partials are still added in group order)."""
    from irfuse.mesh.scatter import ScatterInverse, _group_of
    S = _group_of(k) * k
    slots = len(inv.members)
    groups = len(inv.bases) - 1
    group = np.repeat(np.arange(groups), np.diff(inv.bases))
    firsts = inv.firsts.astype(np.int64)
    gslots = np.minimum(S, slots - np.arange(groups) * S)
    nxt = np.append(firsts[1:], 0)
    is_last = np.zeros(len(firsts), bool)
    is_last[inv.bases[1:] - 1] = True
    ends = np.where(is_last, gslots[group], nxt)
    L = ends - firsts
    order = np.lexsort((np.arange(len(L)), -L, group))
    new_id = np.empty_like(order)
    new_id[order] = np.arange(len(order))
    newL = L[order]
    gstart = np.repeat(np.arange(groups) * S, np.diff(inv.bases))
    newstart = np.zeros(len(order), np.int64)
    cum = np.cumsum(newL)
    newstart[1:] = cum[:-1]  # global positions; each group's stretch starts at g*S as before
    newstart = newstart  # (groups' stretches are contiguous and full: slots of group g at g*S ..)
    oldstart = gstart[order] + firsts[order]
    idx = np.repeat(oldstart - newstart, newL) + np.arange(slots)
    members = inv.members[idx]
    newfirsts = newstart - gstart[order]
    return ScatterInverse(inv.starts, new_id[inv.partials].astype(np.int32), members,
                          newfirsts.astype(np.uint8), inv.bases)


VARIANTS = {"grad": None, "nosum": nosum, "norev": norev, "noscatter": noscatter, "mshared": mshared,
            "mshared_all": mshared_all, "noloop": noloop, "nostore": nostore,
            "all_noloop": lambda t: noloop(mshared_all(t)),
            "b4": batched(4), "b8": batched(8), "pre": pre, "pre_b8": lambda t: batched(8)(pre(t)),
            "preall": lambda t: pre(t, True), "preall_b8": lambda t: batched(8)(pre(t, True)),
            "preall_noloop": lambda t: noloop(pre(t, True)),
            "pad4": pad4, "bylen": None, "bylen_pad4": pad4,
            "u1": lambda t: unroll(t, 1), "u2": lambda t: unroll(t, 2), "pre_u1": lambda t: unroll(pre(t), 1),
            "preall_u1": lambda t: unroll(pre(t, True), 1), "preall_u2": lambda t: unroll(pre(t, True), 2),
            "bylen_preall_u1": lambda t: unroll(pre(t, True), 1)}
for _b in (9, 10, 12):  # the element kernel's launch bounds asking for _b blocks an SM (ptxas's registers)
    VARIANTS[f"lb{_b}"] = VARIANTS[f"energy_lb{_b}"] = (
        lambda t, b=_b: t.replace("__launch_bounds__(128, 8) neo_hookean_energy", f"__launch_bounds__(128, {b}) neo_hookean_energy"))


def main():
    X0, conn0 = mesh.box_tetrahedra(128, numbering="random", seed=0)
    conn, X = mesh.renumber(conn0, *mesh.reorder(conn0, X0, method="morton"), X0)
    u = np.random.default_rng(1).standard_normal(X.shape) * (0.05 / 128)
    E, N = conn.shape[0], X.shape[0]
    src = open("examples/mesh/neo_hookean_energy.kas").read()
    prep = mesh.Connectivity(conn, N)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    inputs = {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prep.conn, "dN": dN,
              "lam": np.float32(0.5), "mu": np.float32(0.3)}

    chosen = sys.argv[1:] or ["energy", *VARIANTS]

    grad = irfuse.compile(src, backend="cuda", filename="neo_hookean_energy.kas")
    energy = irfuse.compile(src.replace("derivative grad of E wrt u;", ""), backend="cuda",
                            filename="neo_hookean_energy.kas")
    runs, results = {}, {}
    for name in chosen:
        prog = energy if name.startswith("energy") else grad
        art = copy.copy(prog._with_binary())
        if VARIANTS.get(name):
            art.source = VARIANTS[name](art.source)
            art.cubin = None
            art = copy.copy(art)
            from irfuse.driver.binaries import with_binaries
            from irfuse.runtime.cuda_device import current_arch
            prog.opened_device()  # a context current
            art = with_binaries(art, "cuda", current_arch())
        dev = open_device("cuda", art)
        inverse = by_length(prep.inverse) if "bylen" in name else prep.inverse
        run = Executor(art, dev).prepare(inputs, E, nodes=N, inverses={"conn": inverse})
        for _ in range(1 if os.environ.get("NCU") else 3):
            run.replay()
        runs[name] = run
        results[name] = run.outputs()
    if os.environ.get("NCU"):  # under Nsight Compute: one run of each, no timing
        return
    times = {name: [] for name in runs}
    for _ in range(5):
        for name, run in runs.items():
            times[name] += [run.time_once() for _ in range(6)]
    print(irfuse.__file__)
    for name in runs:
        extra = ""
        if name.startswith("energy_") and "energy" in results:
            a, b = results[name]["E"], results["energy"]["E"]
            extra = f"  same bits as energy: {np.array_equal(a.view(np.uint32), b.view(np.uint32))}"
        elif name != "grad" and "grad" in results and "grad_u" in results[name]:
            a, b = results[name]["grad_u"], results["grad"]["grad_u"]
            extra = f"  same bits as grad: {np.array_equal(a.view(np.uint32), b.view(np.uint32))}"
        print(f"{name:10s} median {np.median(times[name]) * 1e3:.4f} ms{extra}")


if __name__ == "__main__":
    main()
