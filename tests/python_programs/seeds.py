"""The example programs of examples/*.kas written as Python functions (same names, same
statements), with infix forms where the catalogue has one."""

import irfuse
from irfuse import Matrix, Scalar, Tensor, Vector
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
