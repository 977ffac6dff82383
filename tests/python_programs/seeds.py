"""The example programs of examples/*.kas written as Python functions (same names, same
statements), with infix forms where the catalogue has one."""

import irfuse
from irfuse import Matrix, Scalar, Tensor, Vector, ops
from irfuse.ops import mmul55, mtrans33, smimul33, smmul55, srcp, ttmul311, ttmul411, ttmul3212, venorm3, vvmulabs3

STEPS = 4


@irfuse.program
def bigfusion(A: Matrix[3, 3], B: Matrix[3, 3], c: Vector[3], D: Matrix[5, 5], E: Matrix[5, 5]):
    M1 = A @ B
    v1 = M1 @ c
    s1 = venorm3(v1)
    M2 = mmul55(D, E)
    M3 = M2 + D
    F = smmul55(M3, s1)
    return F


@irfuse.program
def bigfusion_bench(A: Matrix[3, 3], B: Matrix[3, 3], c: Vector[3], D: Matrix[5, 5], E: Matrix[5, 5]):
    M1 = irfuse.ops.mmul33(A, B)
    v1 = irfuse.ops.mvmul33(M1, c)
    s1 = irfuse.ops.venorm3(v1)
    M2 = D @ E
    F = M2 * s1
    return F


@irfuse.program
def synctest(A: Matrix[3, 3]):
    """A chain of element-wise additions, each reading the input again."""
    M_1 = A + A
    M_2 = A + M_1
    M_3 = A + M_2
    F = A + M_3
    return F


@irfuse.program
def transform44(A: Matrix[4, 4], B: Matrix[4, 4], p: Vector[4]):
    C = A @ B
    D = C @ C
    q = D @ p
    return D, q


@irfuse.program
def stvenant(ten4help1: Tensor[3, 3, 3, 3], mat33helpf: Matrix[3, 3], vec3dphi: Vector[3],
             mat33help1: Matrix[3, 3], vecquadweightssums: Scalar):
    vec3nodestiff = mat33help1 @ vec3dphi
    vec3nodestiff = vec3nodestiff * vecquadweightssums
    ten3help1 = ttmul411(ten4help1, vec3nodestiff)
    ten3help2 = ttmul3212(ten3help1, mat33helpf)
    return ten3help2, vec3nodestiff


@irfuse.program
def stvenant_inner(ten3help2: Tensor[3, 3, 3], vec3dpsi: Vector[3], vec3dphi: Vector[3],
                   mat33stress: Matrix[3, 3], vecquadweightssums: Scalar):
    mat33help2 = ttmul311(ten3help2, vec3dpsi)
    vec3help = mat33stress @ vec3dphi
    schelp = vvmulabs3(vec3help, vec3dpsi)
    mattangenthelp = smimul33(vecquadweightssums)
    mattangenthelp *= schelp
    mat33help2 = mat33help2 * vecquadweightssums
    mattangenthelp = mattangenthelp + mat33help2
    return mattangenthelp


@irfuse.program
def rotation_loop(R: Matrix[3, 3], Q: Matrix[3, 3], x: Vector[3]):
    for _ in range(STEPS):
        T = R @ Q
        R = T + Q
        v = R @ x
    n = venorm3(v)
    return R, n


@irfuse.program
def power_iteration(A: Matrix[3, 3], x: Vector[3]):
    for _ in range(100):
        x = A @ x
        n = venorm3(x)
        n = srcp(n)
        x = x * n
    return x


@irfuse.program
def precession(A: Matrix[3, 3], x: Vector[3], p: Vector[3], h: Scalar):
    At = mtrans33(A)
    W = A - At
    for _ in range(300):
        y = W @ x
        d = y * h
        x = x + d
        n = venorm3(x)
        n = srcp(n)
        x = x * n
        q = x * h
        p = p + q
    return x, p


@irfuse.program
def strain_energy(eps: Vector[6], vol: Scalar, C: irfuse.Uniform[Matrix[6, 6]]):
    sig = C @ eps
    w = irfuse.ops.vdot6(eps, sig)
    e = w * vol
    e = e * 0.5
    U = irfuse.sum(e)
    return sig, e, U


@irfuse.program
def cfl_step(x: Vector[3], v: Vector[3], cfl: irfuse.Uniform[Scalar]):
    speed = venorm3(v)
    vmax = irfuse.max(speed)
    dt = cfl / vmax
    step = v * dt
    xn = x + step
    return xn, dt


@irfuse.program
def p1_elastic(X: Matrix[4, 3], u: Matrix[4, 3], dN: irfuse.Uniform[Matrix[4, 3]], lam: irfuse.Uniform[Scalar],
               mu: irfuse.Uniform[Scalar]):
    J = ops.mtmul(X, dN)
    detJ = ops.det(J)
    Jinv = ops.inv(J)
    G = ops.mmul(dN, Jinv)
    H = ops.mtmul(u, G)
    eps = ops.sym(H)
    tr = ops.trace(eps)
    sig = ops.scale(eps, 2)
    sig = ops.scale(sig, mu)
    P = smimul33(tr)
    P = ops.scale(P, lam)
    sig = ops.add(sig, P)
    vol = ops.scale(detJ, 0.16666666666666666)
    return eps, sig, vol


@irfuse.program
def neo_hookean(F: Matrix[3, 3], mu: irfuse.Uniform[Scalar], lam: irfuse.Uniform[Scalar]):
    J = ops.det(F)
    logJ = ops.log(J)
    Finv = ops.inv(F)
    FinvT = Finv.T
    P = ops.sub(F, FinvT)
    P = ops.scale(P, mu)
    a = lam * logJ
    T = ops.scale(FinvT, a)
    P = ops.add(P, T)
    C = ops.mtmul(F, F)
    Cinv = ops.inv(C)
    I = smimul33(1)
    S = ops.sub(I, Cinv)
    S = ops.scale(S, mu)
    T = ops.scale(Cinv, a)
    S = ops.add(S, T)
    trC = ops.trace(C)
    W = ops.sub(trC, 3)
    W = W * mu
    b = a * logJ
    W = ops.add(W, b)
    W = ops.scale(W, 0.5)
    b = mu * logJ
    W = ops.sub(W, b)
    return P, S, W


@irfuse.program
def j2_return(sig: Matrix[3, 3], deps: Matrix[3, 3], ep: Scalar, G: irfuse.Uniform[Scalar],
              K: irfuse.Uniform[Scalar], sy0: irfuse.Uniform[Scalar], H: irfuse.Uniform[Scalar]):
    g2 = ops.scale(G, 2)
    g3 = ops.scale(G, 3)
    den = ops.add(g3, H)
    e = ops.dev(deps)
    e = ops.scale(e, g2)
    s = ops.dev(sig)
    s = ops.add(s, e)
    p = ops.trace(sig)
    p = ops.scale(p, 0.3333333333333333)
    tr = ops.trace(deps)
    tr = ops.scale(tr, K)
    p = ops.add(p, tr)
    q = ops.norm(s)
    q = ops.scale(q, 1.224744871391589)
    sy = H * ep
    sy = ops.add(sy, sy0)
    f = ops.sub(q, sy)
    if f > 0:
        dg = ops.ediv(f, den)
        fac = g3 * dg
        fac = ops.ediv(fac, q)
        n = ops.scale(s, fac)
        s = ops.sub(s, n)
        ep = ops.add(ep, dg)
    I = smimul33(p)
    sig = ops.add(s, I)
    return sig, ep


@irfuse.program
def hex8(X: Matrix[8, 3], u: Matrix[8, 3], dN: irfuse.Uniform[Tensor[8, 8, 3]], w: irfuse.Uniform[Vector[8]]):
    eps: Tensor[8, 3, 3]
    dv: Vector[8]
    for q in range(8):
        J = ops.mtmul(X, dN[q])
        detJ = ops.det(J)
        dv[q] = detJ * w[q]
        Jinv = ops.inv(J)
        G = ops.mmul(dN[q], Jinv)
        H = ops.mtmul(u, G)
        eps[q] = ops.sym(H)
    vol = ops.contract("q->", dv)
    epsm = ops.contract("q,qij->ij", dv, eps)
    epsm = ops.ediv(epsm, vol)
    return eps, vol, epsm
