// Hand-written CUDA of the four element examples (benchmarks/element_codes.py): one thread per
// element, arrays of structures as irfuse's callers pass them, every value in registers, the
// uniform values read from global memory by every thread (cached). `real` is float or double
// (-Dreal=...). Each computes what its example under examples/ says, in the same order of
// operations where that is natural.

__device__ __forceinline__ real det3(const real a[9]) {
    return a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) + a[2] * (a[3] * a[7] - a[4] * a[6]);
}

// inverse = cof^T / det
__device__ __forceinline__ void inv3(const real a[9], real d, real r[9]) {
    r[0] = (a[4] * a[8] - a[5] * a[7]) / d;
    r[1] = -(a[1] * a[8] - a[2] * a[7]) / d;
    r[2] = (a[1] * a[5] - a[2] * a[4]) / d;
    r[3] = -(a[3] * a[8] - a[5] * a[6]) / d;
    r[4] = (a[0] * a[8] - a[2] * a[6]) / d;
    r[5] = -(a[0] * a[5] - a[2] * a[3]) / d;
    r[6] = (a[3] * a[7] - a[4] * a[6]) / d;
    r[7] = -(a[0] * a[7] - a[1] * a[6]) / d;
    r[8] = (a[0] * a[4] - a[1] * a[3]) / d;
}

// The displacement gradient H = u^T G of an element of NODES nodes at one point, where
// J = X^T dN, G = dN J^-1 (dN: NODES x 3 reference gradients); returns det J.
template <int NODES>
__device__ __forceinline__ real displacement_gradient(const real* x, const real* uu, const real* d, real H[9]) {
    real J[9];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            real s = 0;
#pragma unroll
            for (int a = 0; a < NODES; ++a) s += x[3 * a + i] * d[3 * a + j];
            J[3 * i + j] = s;
        }
    real det = det3(J), Ji[9];
    inv3(J, det, Ji);
#pragma unroll
    for (int k = 0; k < 9; ++k) H[k] = 0;
#pragma unroll
    for (int a = 0; a < NODES; ++a) {
        real G[3];
#pragma unroll
        for (int j = 0; j < 3; ++j) G[j] = d[3 * a] * Ji[j] + d[3 * a + 1] * Ji[3 + j] + d[3 * a + 2] * Ji[6 + j];
#pragma unroll
        for (int i = 0; i < 3; ++i)
#pragma unroll
            for (int j = 0; j < 3; ++j) H[3 * i + j] += uu[3 * a + i] * G[j];
    }
    return det;
}

extern "C" __global__ void p1_elastic(const real* __restrict__ X, const real* __restrict__ u,
                                      const real* __restrict__ dN, const real* __restrict__ lam_p,
                                      const real* __restrict__ mu_p, real* __restrict__ eps_o,
                                      real* __restrict__ sig_o, real* __restrict__ vol_o, long n) {
    long e = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (e >= n) return;
    real x[12], uu[12], d[12];
#pragma unroll
    for (int k = 0; k < 12; ++k) { x[k] = X[12 * e + k]; uu[k] = u[12 * e + k]; d[k] = dN[k]; }
    real H[9];
    real det = displacement_gradient<4>(x, uu, d, H);
    real lam = *lam_p, mu = *mu_p;
    real tr = H[0] + H[4] + H[8];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            real ep = (real)0.5 * (H[3 * i + j] + H[3 * j + i]);
            eps_o[9 * e + 3 * i + j] = ep;
            sig_o[9 * e + 3 * i + j] = 2 * mu * ep + (i == j ? lam * tr : (real)0);
        }
    vol_o[e] = det * (real)0.16666666666666666;
}

extern "C" __global__ void neo_hookean(const real* __restrict__ Fg, const real* __restrict__ mu_p,
                                       const real* __restrict__ lam_p, real* __restrict__ P_o,
                                       real* __restrict__ S_o, real* __restrict__ W_o, long n) {
    long e = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (e >= n) return;
    real F[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) F[k] = Fg[9 * e + k];
    real mu = *mu_p, lam = *lam_p;
    real J = det3(F), logJ = log(J), Fi[9];
    inv3(F, J, Fi);
    real a = lam * logJ;
    real C[9];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) C[3 * i + j] = F[i] * F[j] + F[3 + i] * F[3 + j] + F[6 + i] * F[6 + j];
    real Ci[9];
    inv3(C, det3(C), Ci);
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            real FiT = Fi[3 * j + i];
            P_o[9 * e + 3 * i + j] = mu * (F[3 * i + j] - FiT) + a * FiT;
            S_o[9 * e + 3 * i + j] = mu * ((i == j ? (real)1 : (real)0) - Ci[3 * i + j]) + a * Ci[3 * i + j];
        }
    real trC = C[0] + C[4] + C[8];
    W_o[e] = (real)0.5 * ((trC - 3) * mu + a * logJ) - mu * logJ;
}

extern "C" __global__ void j2_return(const real* __restrict__ sig_i, const real* __restrict__ deps_i,
                                     const real* __restrict__ ep_i, const real* __restrict__ G_p,
                                     const real* __restrict__ K_p, const real* __restrict__ sy0_p,
                                     const real* __restrict__ H_p, real* __restrict__ sig_o,
                                     real* __restrict__ ep_o, long n) {
    long e = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (e >= n) return;
    real sg[9], de[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) { sg[k] = sig_i[9 * e + k]; de[k] = deps_i[9 * e + k]; }
    real ep = ep_i[e], G = *G_p, K = *K_p, sy0 = *sy0_p, H = *H_p;
    real g2 = 2 * G, g3 = 3 * G, den = g3 + H;
    real trs = sg[0] + sg[4] + sg[8], trd = de[0] + de[4] + de[8];
    real s[9], q2 = 0;
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            real v = sg[3 * i + j] - (i == j ? trs / 3 : (real)0) + g2 * (de[3 * i + j] - (i == j ? trd / 3 : (real)0));
            s[3 * i + j] = v;
            q2 += v * v;
        }
    real p = trs * (real)0.3333333333333333 + K * trd;
    real q = sqrt(q2) * (real)1.224744871391589;
    real f = q - (sy0 + H * ep);
    real fac = 0;
    if (f > 0) {
        real dg = f / den;
        fac = g3 * dg / q;
        ep += dg;
    }
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j)
            sig_o[9 * e + 3 * i + j] = s[3 * i + j] - fac * s[3 * i + j] + (i == j ? p : (real)0);
    ep_o[e] = ep;
}

// hex8 at quadrature point q: the strain sym(H) into ep, and the point's volume det(J) w[q].
__device__ __forceinline__ real hex8_point(const real* x, const real* uu, const real* dN, const real* w, int q,
                                           real ep[9]) {
    real H[9];
    real dv = displacement_gradient<8>(x, uu, dN + 24 * q, H) * w[q];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) ep[3 * i + j] = (real)0.5 * (H[3 * i + j] + H[3 * j + i]);
    return dv;
}

extern "C" __global__ void hex8(const real* __restrict__ X, const real* __restrict__ u,
                                const real* __restrict__ dN, const real* __restrict__ w,
                                real* __restrict__ eps_o, real* __restrict__ vol_o, real* __restrict__ epsm_o,
                                long n) {
    long e = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (e >= n) return;
    real x[24], uu[24];
#pragma unroll
    for (int k = 0; k < 24; ++k) { x[k] = X[24 * e + k]; uu[k] = u[24 * e + k]; }
    real vol = 0, m[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 1
    for (int q = 0; q < 8; ++q) {
        real ep[9];
        real dv = hex8_point(x, uu, dN, w, q, ep);
        vol += dv;
#pragma unroll
        for (int k = 0; k < 9; ++k) {
            eps_o[72 * e + 9 * q + k] = ep[k];
            m[k] += dv * ep[k];
        }
    }
    vol_o[e] = vol;
#pragma unroll
    for (int k = 0; k < 9; ++k) epsm_o[9 * e + k] = m[k] / vol;
}

// hex8 with the block's elements staged through shared memory both ways, as irfuse's kernels
// do (each array a contiguous run per block, copied by all threads: coalesced), the rows
// padded by one word so that a thread reading its own element's row meets no bank conflict,
// the quadrature loop unrolled and every other value in registers. Launched with HEX8_BY
// threads per block (the block's elements).
#ifndef HEX8_BY
#define HEX8_BY 64
#endif
extern "C" __global__ void __launch_bounds__(HEX8_BY) hex8_staged(
    const real* __restrict__ X, const real* __restrict__ u, const real* __restrict__ dN,
    const real* __restrict__ w, real* __restrict__ eps_o, real* __restrict__ vol_o,
    real* __restrict__ epsm_o, long n) {
    constexpr int BY = HEX8_BY, IN = 25, OUT = 73;  // padded rows: 24 + 1, 72 + 1 words
    __shared__ real s[BY * (OUT + 10)];              // X and u in (2 x 25 words), then eps, epsm, vol out
    const long first = blockIdx.x * (long)BY;
    const int count = n - first < BY ? (int)(n - first) : BY, t = threadIdx.x;
    for (int i = t; i < count * 24; i += BY) {
        s[(i / 24) * IN + i % 24] = X[first * 24 + i];
        s[BY * IN + (i / 24) * IN + i % 24] = u[first * 24 + i];
    }
    __syncthreads();
    real x[24], uu[24];
#pragma unroll
    for (int k = 0; k < 24; ++k) { x[k] = s[t * IN + k]; uu[k] = s[BY * IN + t * IN + k]; }
    __syncthreads();  // (the rows are read: the space holds the outputs from here)
    real vol = 0, m[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (t < count) {
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            real ep[9];
            real dv = hex8_point(x, uu, dN, w, q, ep);
            vol += dv;
#pragma unroll
            for (int k = 0; k < 9; ++k) {
                s[t * OUT + 9 * q + k] = ep[k];
                m[k] += dv * ep[k];
            }
        }
#pragma unroll
        for (int k = 0; k < 9; ++k) s[BY * OUT + t * 9 + k] = m[k] / vol;
        s[BY * OUT + BY * 9 + t] = vol;
    }
    __syncthreads();
    for (int i = t; i < count * 72; i += BY) eps_o[first * 72 + i] = s[(i / 72) * OUT + i % 72];
    for (int i = t; i < count * 9; i += BY) epsm_o[first * 9 + i] = s[BY * OUT + i];
    if (t < count) vol_o[first + t] = s[BY * OUT + BY * 9 + t];
}
