"""Variants of StrainEnergy's emitted source for `variants_ab.py` (run at 8de302e, when the
element loop prefetched rows of 64 bytes or more only, so StrainEnergy's none): the hoisted
calls back to the implementations' own functions (nohoist), and a prefetch of every input's
rows 2 or 4 KB on (pf2k, pf4k; nohoist_pf2k both)."""
import re


def nohoist(src: str) -> str:
    return re.sub(r"(\w+)_hoisted\(irf_h\d+, ", r"\1(", src)


def prefetch_every_row(src: str, nbytes: int = 2048) -> str:
    a = src.index("#elif defined(IRFUSE_CPU_LOOP)")
    b = src.index("\n#else", a)
    sec = src[a:b]
    params = re.search(r"static int (\w+)\((.*?)\)\n", sec[sec.index("static int"):]).group(2)
    lines = []
    for g, w in dict(re.findall(r"\b(g_\w+) \+ first \* (\d+)", sec)).items():
        if f"const real_t* __restrict__ {g}" in params:
            d = max(1, -(-nbytes // (int(w) * 4)))
            lines.append(f"      if (first + {d} < n) IRF_PREFETCH((const char*)({g} + (first + {d}) * {w}));")
    first = "      const long long first = irf_first + irf_t;\n"
    return src[:a] + sec.replace(first, first + "\n".join(lines) + "\n") + src[b:]


VARIANTS = {"nohoist": nohoist, "pf2k": prefetch_every_row, "pf4k": lambda s: prefetch_every_row(s, 4096),
            "nohoist_pf2k": lambda s: prefetch_every_row(nohoist(s))}
