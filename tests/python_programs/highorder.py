"""The programs of examples/highorder/*.kas written as Python functions (same names, same
statements): the bake-off operators by sum factorization on hexahedra of order 3."""

import irfuse
from irfuse import Index, Matrix, Nodal, Scalar, Tensor, Uniform, ops


@irfuse.program
def bp1(u: Nodal[Scalar], conn: Index[64], B: Uniform[Matrix[5, 4]], wdet: Tensor[5, 5, 5]):
    uv = irfuse.gather(u, conn)
    ue = ops.reshape("4x4x4", uv)
    t1 = ops.contract("kc,cba->kba", B, ue)
    t2 = ops.contract("jb,kba->kja", B, t1)
    uq = ops.contract("ia,kja->kji", B, t2)
    vq = ops.contract("kji,kji->kji", uq, wdet)
    s1 = ops.contract("ia,kji->kja", B, vq)
    s2 = ops.contract("jb,kja->kba", B, s1)
    ye = ops.contract("kc,kba->cba", B, s2)
    yv = ops.reshape("64", ye)
    y = irfuse.scatter(yv, conn)
    return y


@irfuse.program
def bp3(u: Nodal[Scalar], conn: Index[64], B: Uniform[Matrix[5, 4]], D: Uniform[Matrix[5, 4]],
        gxx: Tensor[5, 5, 5], gxy: Tensor[5, 5, 5], gxz: Tensor[5, 5, 5], gyy: Tensor[5, 5, 5],
        gyz: Tensor[5, 5, 5], gzz: Tensor[5, 5, 5]):
    uv = irfuse.gather(u, conn)
    ue = ops.reshape("4x4x4", uv)
    bz = ops.contract("kc,cba->kba", B, ue)
    dz = ops.contract("kc,cba->kba", D, ue)
    bby = ops.contract("jb,kba->kja", B, bz)
    bdy = ops.contract("jb,kba->kja", D, bz)
    dby = ops.contract("jb,kba->kja", B, dz)
    gx = ops.contract("ia,kja->kji", D, bby)
    gy = ops.contract("ia,kja->kji", B, bdy)
    gz = ops.contract("ia,kja->kji", B, dby)
    vx = ops.contract("kji,kji->kji", gxx, gx)
    p = ops.contract("kji,kji->kji", gxy, gy)
    vx = ops.add(vx, p)
    p = ops.contract("kji,kji->kji", gxz, gz)
    vx = ops.add(vx, p)
    vy = ops.contract("kji,kji->kji", gxy, gx)
    p = ops.contract("kji,kji->kji", gyy, gy)
    vy = ops.add(vy, p)
    p = ops.contract("kji,kji->kji", gyz, gz)
    vy = ops.add(vy, p)
    vz = ops.contract("kji,kji->kji", gxz, gx)
    p = ops.contract("kji,kji->kji", gyz, gy)
    vz = ops.add(vz, p)
    p = ops.contract("kji,kji->kji", gzz, gz)
    vz = ops.add(vz, p)
    tx = ops.contract("ia,kji->kja", D, vx)
    ty = ops.contract("ia,kji->kja", B, vy)
    tz = ops.contract("ia,kji->kja", B, vz)
    ax = ops.contract("jb,kja->kba", B, tx)
    ay = ops.contract("jb,kja->kba", D, ty)
    az = ops.contract("jb,kja->kba", B, tz)
    axy = ops.add(ax, ay)
    yb = ops.contract("kc,kba->cba", B, axy)
    yd = ops.contract("kc,kba->cba", D, az)
    ye = ops.add(yb, yd)
    yv = ops.reshape("64", ye)
    y = irfuse.scatter(yv, conn)
    return y
