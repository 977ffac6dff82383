"""The programs of examples/mesh/*.kas written as Python functions (same names, same
statements): gathers and scatters through `irfuse.Index` connectivities."""

import irfuse
from irfuse import Index, Matrix, Nodal, Scalar, Uniform, Vector, ops


@irfuse.program
def lumped_mass(X: Nodal[Vector[3]], conn: Index[4], dN: Uniform[Matrix[4, 3]], quarter: Uniform[Vector[4]],
                rho: Uniform[Scalar]):
    Xe = irfuse.gather(X, conn)
    J = ops.mtmul(Xe, dN)
    w = ops.det(J)
    w = ops.scale(w, 0.16666666666666666)
    w = ops.smul(w, rho)
    me = ops.scale(quarter, w)
    m = irfuse.scatter(me, conn)
    return m


@irfuse.program
def p1_residual(X: Nodal[Vector[3]], u: Nodal[Vector[3]], conn: Index[4], dN: Uniform[Matrix[4, 3]],
                lam: Uniform[Scalar], mu: Uniform[Scalar]):
    Xe = irfuse.gather(X, conn)
    ue = irfuse.gather(u, conn)
    J = ops.mtmul(Xe, dN)
    detJ = ops.det(J)
    Jinv = ops.inv(J)
    G = ops.mmul(dN, Jinv)
    H = ops.mtmul(ue, G)
    eps = ops.sym(H)
    tr = ops.trace(eps)
    sig = ops.scale(eps, 2)
    sig = ops.scale(sig, mu)
    P = ops.smimul33(tr)
    P = ops.scale(P, lam)
    sig = ops.add(sig, P)
    vol = ops.scale(detJ, 0.16666666666666666)
    fe = ops.mmul(G, sig)
    fe = ops.scale(fe, vol)
    r = irfuse.scatter(fe, conn)
    return r


@irfuse.program
def p1_residual_infix(X: Nodal[Vector[3]], u: Nodal[Vector[3]], conn: Index[4], dN: Uniform[Matrix[4, 3]],
                      lam: Uniform[Scalar], mu: Uniform[Scalar]):
    """The same residual written as a scientist would: infix forms, nested expressions, the
    scatter in the return."""
    J = ops.mtmul(irfuse.gather(X, conn), dN)
    G = dN @ ops.inv(J)
    eps = ops.sym(ops.mtmul(irfuse.gather(u, conn), G))
    sig = eps * 2 * mu + ops.smimul33(ops.trace(eps)) * lam
    return irfuse.scatter((G @ sig) * (ops.det(J) * 0.16666666666666666), conn)


@irfuse.program
def explicit_step(X: Nodal[Vector[3]], u: Nodal[Vector[3]], v: Nodal[Vector[3]], m: Nodal[Scalar], conn: Index[4],
                  dN: Uniform[Matrix[4, 3]], lam: Uniform[Scalar], mu: Uniform[Scalar], dt: Uniform[Scalar]):
    du = ops.svmul3(v, dt)
    u1 = ops.vadd3(u, du)
    Xe = irfuse.gather(X, conn)
    ue = irfuse.gather(u1, conn)
    J = ops.mtmul(Xe, dN)
    detJ = ops.det(J)
    Jinv = ops.inv(J)
    G = ops.mmul(dN, Jinv)
    H = ops.mtmul(ue, G)
    eps = ops.sym(H)
    tr = ops.trace(eps)
    sig = ops.scale(eps, 2)
    sig = ops.scale(sig, mu)
    P = ops.smimul33(tr)
    P = ops.scale(P, lam)
    sig = ops.add(sig, P)
    vol = ops.scale(detJ, 0.16666666666666666)
    fe = ops.mmul(G, sig)
    fe = ops.scale(fe, vol)
    r = irfuse.scatter(fe, conn)
    minv = ops.srcp(m)
    a = ops.svmul3(r, minv)
    a = ops.svmul3(a, dt)
    v1 = ops.vsub3(v, a)
    return u1, v1
