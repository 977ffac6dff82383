"""Probe (kept for its record): the bake-off operators written with their axes rotated, each
contraction putting the index it makes first (examples/highorder/operators.py's API; imported by a
copy of benchmarks/bakeoff.py that adds `irfuse rotated` beside `irfuse`; 2026-12-03)."""
import sys

import operators as O

def _header(p, q, poisson, mesh=True):
    n, nodes = p + 1, (p + 1) ** 3
    e, a, b, c = f"{n}x{n}x{n}", f"{q}x{n}x{n}", f"{q}x{q}x{n}", f"{q}x{q}x{q}"
    back1, back2 = f"{n}x{q}x{q}", f"{n}x{n}x{q}"
    lines = ["nodal scalar u, y;", f"index{nodes} conn;"] if mesh else []
    first, rows = ("u, conn", [f"vector{nodes} uv, yv;"]) if mesh else ("ue", [])
    if not poisson:
        lines += [f"uniform matrix{q}x{n} B;", *rows, f"tensor{e} ue, ye;", f"tensor{a} t1;", f"tensor{b} t2;",
                  f"tensor{back1} s1;", f"tensor{back2} s2;",
                  f"tensor{c} uq, vq, wdet;", f"input {first}, B, wdet;"]
    else:
        lines += [f"uniform matrix{q}x{n} B, D;", *rows, f"tensor{e} ue, ye, yb, yd;",
                  f"tensor{a} bz, dz;", f"tensor{b} bby, bdy, dby;", f"tensor{back1} tx, ty, tz;",
                  f"tensor{back2} ax, ay, az, axy;",
                  f"tensor{c} gx, gy, gz, vx, vy, vz, p, gxx, gxy, gxz, gyy, gyz, gzz;",
                  f"input {first}, B, D, gxx, gxy, gxz, gyy, gyz, gzz;"]
    return lines

def _mass():
    return ['t1 = contract("kc,cba->kba", B, ue);',
            't2 = contract("jb,kba->jka", B, t1);',
            'uq = contract("ia,jka->ijk", B, t2);',
            'vq = contract("kji,ijk->ijk", wdet, uq);',
            's1 = contract("ia,ijk->ajk", B, vq);',
            's2 = contract("jb,ajk->bak", B, s1);',
            'ye = contract("kc,bak->cba", B, s2);']

def _poisson():
    body = ['bz = contract("kc,cba->kba", B, ue);',
            'dz = contract("kc,cba->kba", D, ue);',
            'bby = contract("jb,kba->jka", B, bz);',
            'bdy = contract("jb,kba->jka", D, bz);',
            'dby = contract("jb,kba->jka", B, dz);',
            'gx = contract("ia,jka->ijk", D, bby);',
            'gy = contract("ia,jka->ijk", B, bdy);',
            'gz = contract("ia,jka->ijk", B, dby);']
    for v, row in (("vx", ("gxx", "gxy", "gxz")), ("vy", ("gxy", "gyy", "gyz")), ("vz", ("gxz", "gyz", "gzz"))):
        body.append(f'{v} = contract("kji,ijk->ijk", {row[0]}, gx);')
        for g, grad in zip(row[1:], ("gy", "gz")):
            body += [f'p = contract("kji,ijk->ijk", {g}, {grad});', f"{v} = add({v}, p);"]
    body += ['tx = contract("ia,ijk->ajk", D, vx);',
             'ty = contract("ia,ijk->ajk", B, vy);',
             'tz = contract("ia,ijk->ajk", B, vz);',
             'ax = contract("jb,ajk->bak", B, tx);',
             'ay = contract("jb,ajk->bak", D, ty);',
             'az = contract("jb,ajk->bak", B, tz);',
             "axy = add(ax, ay);",
             'yb = contract("kc,bak->cba", B, axy);',
             'yd = contract("kc,bak->cba", D, az);',
             "ye = add(yb, yd);"]
    return body

def bp1_source(p, q): n = p + 1; return "\n".join(_header(p, q, False) + O._gathered(n) + _mass() + O._scattered(n))
def bk1_source(p, q): return "\n".join(_header(p, q, False, mesh=False) + _mass() + O._returned())
def bp3_source(p, q): n = p + 1; return "\n".join(_header(p, q, True) + O._gathered(n) + _poisson() + O._scattered(n))
def bk3_source(p, q): return "\n".join(_header(p, q, True, mesh=False) + _poisson() + O._returned())
