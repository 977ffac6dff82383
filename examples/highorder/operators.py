"""The bake-off operators of `bp1.kas` and `bp3.kas` written for any order: KAS text for
hexahedra of order p with q Gauss points an axis (the files are these at p = 3, q = 5).

    from operators import bp1_source, bp3_source   # (this folder on the path)
    prog = irfuse.compile(bp3_source(3, 5))

`bk1_source` and `bk3_source` are the element operators alone (the bake-off's BK1 and BK3: no
gather, no scatter), programs over the elements whose values are given and returned per
element.

Values of an element are [c, b, a] tensors (z, y, x); the 1-D tables B and D are (q, p + 1)
uniform matrices (tests/highorder_reference.py's `lagrange_tables`). The language's values and
connectivities have at most 1,024 entries an axis (`index1000`, `vector1000` at order 9), so p
is at most 9 here (checked against the references up to 8); order 10 (1,331 nodes) is refused
by name, and BP1 and BP3 at order 9 are too (the reshape of an element's 1,000 values into the
scattered vector expands past a definition's budget). An element of more than 256
nodes (order 6 and above) is a scatter group of its own (`irfuse.artifact.scatter_groups`).
"""

from __future__ import annotations


def _header(p: int, q: int, poisson: bool, mesh: bool = True) -> list[str]:
    n, nodes = p + 1, (p + 1) ** 3
    e, a, b, c = f"{n}x{n}x{n}", f"{q}x{n}x{n}", f"{q}x{q}x{n}", f"{q}x{q}x{q}"
    lines = ["nodal scalar u, y;", f"index{nodes} conn;"] if mesh else []
    first, rows = ("u, conn", [f"vector{nodes} uv, yv;"]) if mesh else ("ue", [])
    if not poisson:
        lines += [f"uniform matrix{q}x{n} B;", *rows, f"tensor{e} ue, ye;",
                  f"tensor{a} t1, s2;", f"tensor{b} t2, s1;", f"tensor{c} uq, vq, wdet;",
                  f"input {first}, B, wdet;"]
    else:
        lines += [f"uniform matrix{q}x{n} B, D;", *rows, f"tensor{e} ue, ye, yb, yd;",
                  f"tensor{a} bz, dz, ax, ay, az, axy;", f"tensor{b} bby, bdy, dby, tx, ty, tz;",
                  f"tensor{c} gx, gy, gz, vx, vy, vz, p, gxx, gxy, gxz, gyy, gyz, gzz;",
                  f"input {first}, B, D, gxx, gxy, gxz, gyy, gyz, gzz;"]
    return lines


def _gathered(n: int) -> list[str]:
    return ["uv = gather(u, conn);", f'ue = reshape("{n}x{n}x{n}", uv);']


def _returned() -> list[str]:
    return ["return ye;", ""]


def _scattered(n: int) -> list[str]:
    return [f'yv = reshape("{n ** 3}", ye);', "y = scatter(yv, conn);", "return y;", ""]


def bp1_source(p: int, q: int) -> str:
    """BP1, y = M u: interpolate to the points along z, y, x; scale by the stored w detJ;
    integrate back along x, y, z; scatter."""
    n = p + 1
    return "\n".join(_header(p, q, poisson=False) + _gathered(n) + _mass() + _scattered(n))


def bk1_source(p: int, q: int) -> str:
    """BK1: BP1's element operator alone, ye = M_e ue for each element's own values (no gather,
    no scatter: a program over the elements, ue and ye arrays of them)."""
    return "\n".join(_header(p, q, poisson=False, mesh=False) + _mass() + _returned())


def _mass() -> list[str]:
    return [
        't1 = contract("kc,cba->kba", B, ue);',
        't2 = contract("jb,kba->kja", B, t1);',
        'uq = contract("ia,kja->kji", B, t2);',
        'vq = contract("kji,kji->kji", uq, wdet);',
        's1 = contract("ia,kji->kja", B, vq);',
        's2 = contract("jb,kja->kba", B, s1);',
        'ye = contract("kc,kba->cba", B, s2);']


def bp3_source(p: int, q: int) -> str:
    """BP3, y = K u: the reference gradient at the points, times the stored symmetric factors
    (gxx .. gzz), integrated against the basis gradients; scatter."""
    n = p + 1
    return "\n".join(_header(p, q, poisson=True) + _gathered(n) + _poisson() + _scattered(n))


def bk3_source(p: int, q: int) -> str:
    """BK3: BP3's element operator alone (see `bk1_source`)."""
    return "\n".join(_header(p, q, poisson=True, mesh=False) + _poisson() + _returned())


def _poisson() -> list[str]:
    body = [
        'bz = contract("kc,cba->kba", B, ue);',
        'dz = contract("kc,cba->kba", D, ue);',
        'bby = contract("jb,kba->kja", B, bz);',
        'bdy = contract("jb,kba->kja", D, bz);',
        'dby = contract("jb,kba->kja", B, dz);',
        'gx = contract("ia,kja->kji", D, bby);',
        'gy = contract("ia,kja->kji", B, bdy);',
        'gz = contract("ia,kja->kji", B, dby);']
    for v, row in (("vx", ("gxx", "gxy", "gxz")), ("vy", ("gxy", "gyy", "gyz")), ("vz", ("gxz", "gyz", "gzz"))):
        body.append(f'{v} = contract("kji,kji->kji", {row[0]}, gx);')
        for g, grad in zip(row[1:], ("gy", "gz")):
            body += [f'p = contract("kji,kji->kji", {g}, {grad});', f"{v} = add({v}, p);"]
    body += [
        'tx = contract("ia,kji->kja", D, vx);',
        'ty = contract("ia,kji->kja", B, vy);',
        'tz = contract("ia,kji->kja", B, vz);',
        'ax = contract("jb,kja->kba", B, tx);',
        'ay = contract("jb,kja->kba", D, ty);',
        'az = contract("jb,kja->kba", B, tz);',
        "axy = add(ax, ay);",
        'yb = contract("kc,kba->cba", B, axy);',
        'yd = contract("kc,kba->cba", D, az);',
        "ye = add(yb, yd);"]
    return body
