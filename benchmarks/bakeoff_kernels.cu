// Hand-written float64 kernels of the bake-off's operators (`bakeoff.py`'s contender
// "hand-written CUDA"): a yardstick of what a kernel written for this GPU by hand reaches on the
// same data, the same arithmetic (the 1-D tables B and D between P nodes and Q points an axis,
// the stored quadrature data) and the same byte floor as irfuse's programs.
//
// The layout is the one the published GPU kernels of the field use (nekRS's, libCEED's): a block
// of Q x Q threads an element, thread (i, j) holding a column of the element's values along the
// third axis in registers; the contractions along the third axis are in registers, those along
// the first two go through shared memory, where a warp's threads read one word each (a row of a
// table or of a value's plane, broadcast to the threads sharing it). BK: each element's own
// values, read and written once. BP (`MESH`): u gathered through the connectivity and y added into
// with atomicAdd, so a result's bits vary from run to run (irfuse's scatter adds in a fixed order);
// y is zeroed by the caller before each call.
//
// Values: u[e][c][b][a] (a fastest), P^3 an element; the quadrature data w[e][k][j][i], Q^3 an
// element (BP1/BK1: w detJ; BP3/BK3: the six entries g0..g5 of w detJ J^-1 J^-T in the order xx,
// xy, xz, yy, yz, zz, each its own array); B[i][a], D[i][a] (Q x P).

template <int P, int Q, bool MESH>
__global__ void __launch_bounds__(Q * Q) bake1(const double* __restrict__ u, const int* __restrict__ conn,
                                               const double* __restrict__ Bg, const double* __restrict__ w,
                                               double* __restrict__ y)
{
  constexpr int PPP = P * P * P, QQ = Q * Q, QQQ = Q * Q * Q;
  __shared__ double sB[Q][P];
  __shared__ double sa[QQQ > PPP ? QQQ : PPP];  // u, then the values at the points
  __shared__ double sb[QQ * P];                 // a contraction's result along the second axis
  const int i = threadIdx.x, j = threadIdx.y, t = j * Q + i;
  const long long e = blockIdx.x;
  for (int k = t; k < Q * P; k += QQ) (&sB[0][0])[k] = Bg[k];
  for (int k = t; k < PPP; k += QQ) sa[k] = MESH ? u[conn[e * PPP + k]] : u[e * PPP + k];
  __syncthreads();
  double r[Q];
  if (i < P && j < P) {  // along c, in registers: bz[k][b][a]
    double col[P];
#pragma unroll
    for (int c = 0; c < P; ++c) col[c] = sa[(c * P + j) * P + i];
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0;
#pragma unroll
      for (int c = 0; c < P; ++c) s += sB[k][c] * col[c];
      r[k] = s;
    }
  }
  __syncthreads();
  if (i < P && j < P) {
#pragma unroll
    for (int k = 0; k < Q; ++k) sa[(k * P + j) * P + i] = r[k];
  }
  __syncthreads();
  if (i < P) {  // along b: t[k][j][a]
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0;
#pragma unroll
      for (int b = 0; b < P; ++b) s += sB[j][b] * sa[(k * P + b) * P + i];
      sb[(k * Q + j) * P + i] = s;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < Q; ++k) {  // along a, then times the quadrature data: v[k][j][i] in registers
    double s = 0;
#pragma unroll
    for (int a = 0; a < P; ++a) s += sB[i][a] * sb[(k * Q + j) * P + a];
    r[k] = s * w[e * QQQ + (k * Q + j) * Q + i];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < Q; ++k) sa[(k * Q + j) * Q + i] = r[k];
  __syncthreads();
  if (i < P) {  // back along i: [k][j][a]
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0;
#pragma unroll
      for (int ii = 0; ii < Q; ++ii) s += sB[ii][i] * sa[(k * Q + j) * Q + ii];
      sb[(k * Q + j) * P + i] = s;
    }
  }
  __syncthreads();
  if (i < P && j < P) {  // back along j into registers, then along k
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0;
#pragma unroll
      for (int jj = 0; jj < Q; ++jj) s += sB[jj][j] * sb[(k * Q + jj) * P + i];
      r[k] = s;
    }
#pragma unroll
    for (int c = 0; c < P; ++c) {
      double s = 0;
#pragma unroll
      for (int k = 0; k < Q; ++k) s += sB[k][c] * r[k];
      const long long at = e * PPP + (c * P + j) * P + i;
      if (MESH) atomicAdd(y + conn[at], s); else y[at] = s;
    }
  }
}

template <int P, int Q, bool MESH>
__global__ void __launch_bounds__(Q * Q) bake3(const double* __restrict__ u, const int* __restrict__ conn,
                                               const double* __restrict__ Bg, const double* __restrict__ Dg,
                                               const double* __restrict__ g0, const double* __restrict__ g1,
                                               const double* __restrict__ g2, const double* __restrict__ g3,
                                               const double* __restrict__ g4, const double* __restrict__ g5,
                                               double* __restrict__ y)
{
  constexpr int PP = P * P, PPP = P * P * P, QQ = Q * Q, QQQ = Q * Q * Q;
  __shared__ double sB[Q][P], sD[Q][P];
  __shared__ double sa[3 * QQQ];     // u; then three values along the second axis; then v at the points
  __shared__ double sb[3 * QQ * P];  // bz and dz; then three values back along the first axis
  const int i = threadIdx.x, j = threadIdx.y, t = j * Q + i;
  const long long e = blockIdx.x;
  for (int k = t; k < Q * P; k += QQ) {
    (&sB[0][0])[k] = Bg[k];
    (&sD[0][0])[k] = Dg[k];
  }
  for (int k = t; k < PPP; k += QQ) sa[k] = MESH ? u[conn[e * PPP + k]] : u[e * PPP + k];
  __syncthreads();
  double* const bz = sb;
  double* const dz = sb + Q * PP;
  if (i < P && j < P) {  // along c, in registers: bz, dz [k][b][a]
    double col[P];
#pragma unroll
    for (int c = 0; c < P; ++c) col[c] = sa[(c * P + j) * P + i];
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0, d = 0;
#pragma unroll
      for (int c = 0; c < P; ++c) {
        s += sB[k][c] * col[c];
        d += sD[k][c] * col[c];
      }
      bz[(k * P + j) * P + i] = s;
      dz[(k * P + j) * P + i] = d;
    }
  }
  __syncthreads();
  double* const tbb = sa;
  double* const tdb = sa + QQ * P;
  double* const tbd = sa + 2 * QQ * P;
  if (i < P) {  // along b: [k][j][a]
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double bb = 0, db = 0, bd = 0;
#pragma unroll
      for (int b = 0; b < P; ++b) {
        const double x = bz[(k * P + b) * P + i], z = dz[(k * P + b) * P + i];
        bb += sB[j][b] * x;
        db += sD[j][b] * x;
        bd += sB[j][b] * z;
      }
      tbb[(k * Q + j) * P + i] = bb;
      tdb[(k * Q + j) * P + i] = db;
      tbd[(k * Q + j) * P + i] = bd;
    }
  }
  __syncthreads();
  double vx[Q], vy[Q], vz[Q];
#pragma unroll
  for (int k = 0; k < Q; ++k) {  // along a: the reference gradient, then v = G g in registers
    double gx = 0, gy = 0, gz = 0;
#pragma unroll
    for (int a = 0; a < P; ++a) {
      const int at = (k * Q + j) * P + a;
      gx += sD[i][a] * tbb[at];
      gy += sB[i][a] * tdb[at];
      gz += sB[i][a] * tbd[at];
    }
    const long long q = e * QQQ + (k * Q + j) * Q + i;
    const double xx = g0[q], xy = g1[q], xz = g2[q], yy = g3[q], yz = g4[q], zz = g5[q];
    vx[k] = xx * gx + xy * gy + xz * gz;
    vy[k] = xy * gx + yy * gy + yz * gz;
    vz[k] = xz * gx + yz * gy + zz * gz;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < Q; ++k) {
    sa[(k * Q + j) * Q + i] = vx[k];
    sa[QQQ + (k * Q + j) * Q + i] = vy[k];
    sa[2 * QQQ + (k * Q + j) * Q + i] = vz[k];
  }
  __syncthreads();
  if (i < P) {  // back along i: [k][j][a]
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double wx = 0, wy = 0, wz = 0;
#pragma unroll
      for (int ii = 0; ii < Q; ++ii) {
        const int at = (k * Q + j) * Q + ii;
        wx += sD[ii][i] * sa[at];
        wy += sB[ii][i] * sa[QQQ + at];
        wz += sB[ii][i] * sa[2 * QQQ + at];
      }
      sb[(k * Q + j) * P + i] = wx;
      sb[QQ * P + (k * Q + j) * P + i] = wy;
      sb[2 * QQ * P + (k * Q + j) * P + i] = wz;
    }
  }
  __syncthreads();
  if (i < P && j < P) {  // back along j into registers, then along k
    double ax[Q], az[Q];
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0, z = 0;
#pragma unroll
      for (int jj = 0; jj < Q; ++jj) {
        const int at = (k * Q + jj) * P + i;
        s += sB[jj][j] * sb[at] + sD[jj][j] * sb[QQ * P + at];
        z += sB[jj][j] * sb[2 * QQ * P + at];
      }
      ax[k] = s;
      az[k] = z;
    }
#pragma unroll
    for (int c = 0; c < P; ++c) {
      double s = 0;
#pragma unroll
      for (int k = 0; k < Q; ++k) s += sB[k][c] * ax[k] + sD[k][c] * az[k];
      const long long at = e * PPP + (c * P + j) * P + i;
      if (MESH) atomicAdd(y + conn[at], s); else y[at] = s;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Lines: every step maps a thread to a line of values along the axis the step contracts, so that
// the 1-D tables are read at the same place by every thread at once (`cB`, `cD`: constant memory,
// set by the caller), as irfuse's contractions with their tables fixed read them. The first
// contraction reads u where it lies and the last writes y there; the contraction along the first
// axis, the quadrature data and the transposed contraction along it are one thread's, in
// registers; the values between go through shared memory at pitches chosen (`best_pitch`) so that
// a half-warp's 64-bit accesses meet each bank pair once where they can. NE elements a block.

__constant__ double cB[256], cD[256];  // B[i][a], D[i][a] at i * P + a

// Bank pairs a half-warp's 64-bit accesses meet most often (its wavefronts), summed over the
// half-warps of `lanes` threads, each taking line l = (x, z) (x = l / inner, z = l % inner) at
// word x * plane + z * zstride + s * sstride in step s of `steps`: what a pitch costs a step.
__host__ __device__ constexpr int conflicts(int lanes, int inner, int plane, int zstride, int sstride, int steps)
{
  int total = 0;
  for (int s = 0; s < steps; ++s)
    for (int h = 0; h < lanes; h += 16) {
      int words[16] = {}, count[16] = {}, worst = 0;
      for (int l = h; l < h + 16 && l < lanes; ++l) {
        const int word = l / inner * plane + l % inner * zstride + s * sstride;
        bool again = false;
        for (int m = h; m < l; ++m) again = again || words[m - h] == word;
        words[l - h] = word;
        if (!again) {
          const int c = ++count[word % 16];
          worst = c > worst ? c : worst;
        }
      }
      total += worst;
    }
  return total;
}

// [k][b][a] (bz, dz, ax, az): written and read by threads (b, a) along k and by threads (k, a)
// along b; the k-plane pitch from P * P up that costs both fewest wavefronts.
__host__ __device__ constexpr int pitch_kba(int p, int q)
{
  int best = p * p, cost = 1 << 30;
  for (int pitch = p * p; pitch < p * p + 16; ++pitch) {
    const int c = conflicts(q * p, p, pitch, 1, p, p) + conflicts(p * p, p, p, 1, pitch, q);
    if (c < cost) { cost = c; best = pitch; }
  }
  return best;
}

// [k][j][a] at lines of `pl` words (the values along the second axis): by threads (k, a) along j
// and by threads (k, j) along a.
__host__ __device__ constexpr int pitch_kja(int p, int q, int pl)
{
  int best = q * pl, cost = 1 << 30;
  for (int pitch = q * pl; pitch < q * pl + 16; ++pitch) {
    const int c = conflicts(q * p, p, pitch, 1, pl, q) + conflicts(q * q, q, pitch, pl, 1, p);
    if (c < cost) { cost = c; best = pitch; }
  }
  return best;
}

// An element's shared words: A1 values laid out [k][b][a], A2 [k][j][a], and EXTRA words; NE
// elements a block (up to 256 threads, within 48 KB).
template <int P, int Q, int A1, int A2, int EXTRA = 0, bool TIGHT = false>
struct LinesLayout {
  static constexpr int PL = P % 2 ? P : P + 1;  // a line's words along a (odd: lines a word's stride apart, banks apart)
  static constexpr int S1 = pitch_kba(P, Q);
  static constexpr int S2 = pitch_kja(P, Q, PL);
  // (r1 as large as r2 where that is more than its A1 values need, unless TIGHT: so the first
  // two lines kernels were timed)
  static constexpr int R1 = TIGHT || A1 * Q * S1 > A2 * Q * S2 ? A1 * Q * S1 : A2 * Q * S2;
  static constexpr int WORDS = R1 + A2 * Q * S2 + EXTRA;
  static constexpr int FIT = (48 * 1024) / (WORDS * 8), WANT = 256 / (Q * Q);
  static constexpr int NE = WANT < 1 ? 1 : WANT < FIT ? WANT : FIT < 1 ? 1 : FIT;
  static_assert(WORDS * 8 <= 48 * 1024, "an element's values do not fit a block's 48 KB of static shared memory");
};

template <int P, int Q, bool MESH, bool COALESCED = false>
__global__ void __launch_bounds__(Q * Q * LinesLayout<P, Q, 2, 3, COALESCED ? 3 * Q * Q * (Q % 2 ? Q : Q + 1) : 0, COALESCED>::NE) lines3(
    const double* __restrict__ u, const int* __restrict__ conn, const double* __restrict__ g0,
    const double* __restrict__ g1, const double* __restrict__ g2, const double* __restrict__ g3,
    const double* __restrict__ g4, const double* __restrict__ g5, double* __restrict__ y, long long elements)
{
  using L = LinesLayout<P, Q, 2, 3, COALESCED ? 3 * Q * Q * (Q % 2 ? Q : Q + 1) : 0, COALESCED>;
  constexpr int PPP = P * P * P, QQQ = Q * Q * Q, S1 = L::S1, S2 = L::S2, PL = L::PL;
  __shared__ double smem[L::NE * L::WORDS];
  const int el = threadIdx.x / (Q * Q), l = threadIdx.x % (Q * Q);
  const long long e = (long long)blockIdx.x * L::NE + el;
  const bool live = e < elements;
  double* const r1 = smem + el * L::WORDS;  // bz, dz; then ax, az
  double* const r2 = r1 + L::R1;            // the three values along j, then back along j
  if (live && l < P * P) {  // along c: thread (b, a), its column of u where it lies
    const int b = l / P, a = l % P;
    double col[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
      const long long at = e * PPP + (c * P + b) * P + a;
      col[c] = MESH ? u[conn[at]] : u[at];
    }
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0, d = 0;
#pragma unroll
      for (int c = 0; c < P; ++c) {
        s += cB[k * P + c] * col[c];
        d += cD[k * P + c] * col[c];
      }
      r1[k * S1 + b * P + a] = s;
      r1[Q * S1 + k * S1 + b * P + a] = d;
    }
  }
  __syncthreads();
  if (live && l < Q * P) {  // along b: thread (k, a)
    const int k = l / P, a = l % P;
    double x[P], z[P];
#pragma unroll
    for (int b = 0; b < P; ++b) {
      x[b] = r1[k * S1 + b * P + a];
      z[b] = r1[Q * S1 + k * S1 + b * P + a];
    }
#pragma unroll
    for (int j = 0; j < Q; ++j) {
      double bb = 0, db = 0, bd = 0;
#pragma unroll
      for (int b = 0; b < P; ++b) {
        bb += cB[j * P + b] * x[b];
        db += cD[j * P + b] * x[b];
        bd += cB[j * P + b] * z[b];
      }
      r2[k * S2 + j * PL + a] = bb;
      r2[Q * S2 + k * S2 + j * PL + a] = db;
      r2[2 * Q * S2 + k * S2 + j * PL + a] = bd;
    }
  }
  __syncthreads();
  if constexpr (COALESCED) {
    // Along a: thread (j, i) for each k, its rows of the tables in registers, the quadrature
    // data read coalesced (consecutive i); v to shared memory at lines of QL words, then back
    // along i by lines (thread (k, j)).
    constexpr int QL = Q % 2 ? Q : Q + 1;
    double* const vs = r2 + 3 * Q * S2;  // [3][k][j][i] at lines of QL words, planes of Q * QL
    if (live) {
      const int j = l / Q, i = l % Q;
      double bi[P], di[P];
#pragma unroll
      for (int a = 0; a < P; ++a) {
        bi[a] = cB[i * P + a];
        di[a] = cD[i * P + a];
      }
      for (int k = 0; k < Q; ++k) {
        double gx = 0, gy = 0, gz = 0;
#pragma unroll
        for (int a = 0; a < P; ++a) {
          const int at = k * S2 + j * PL + a;
          gx += di[a] * r2[at];
          gy += bi[a] * r2[Q * S2 + at];
          gz += bi[a] * r2[2 * Q * S2 + at];
        }
        const long long q = e * QQQ + (k * Q + j) * Q + i;
        const double xx = g0[q], xy = g1[q], xz = g2[q], yy = g3[q], yz = g4[q], zz = g5[q];
        const int at = (k * Q + j) * QL + i;
        vs[at] = xx * gx + xy * gy + xz * gz;
        vs[Q * Q * QL + at] = xy * gx + yy * gy + yz * gz;
        vs[2 * Q * Q * QL + at] = xz * gx + yz * gy + zz * gz;
      }
    }
    __syncthreads();
    if (live) {  // back along i: thread (k, j), uniform tables
      const int k = l / Q, j = l % Q;
      double vx[Q], vy[Q], vz[Q];
#pragma unroll
      for (int i = 0; i < Q; ++i) {
        const int at = (k * Q + j) * QL + i;
        vx[i] = vs[at];
        vy[i] = vs[Q * Q * QL + at];
        vz[i] = vs[2 * Q * Q * QL + at];
      }
#pragma unroll
      for (int a = 0; a < P; ++a) {
        double wx = 0, wy = 0, wz = 0;
#pragma unroll
        for (int i = 0; i < Q; ++i) {
          wx += cD[i * P + a] * vx[i];
          wy += cB[i * P + a] * vy[i];
          wz += cB[i * P + a] * vz[i];
        }
        r2[k * S2 + j * PL + a] = wx;
        r2[Q * S2 + k * S2 + j * PL + a] = wy;
        r2[2 * Q * S2 + k * S2 + j * PL + a] = wz;
      }
    }
    __syncthreads();
  } else {
    if (live) {  // along a and back: thread (k, j), the quadrature data along i, in registers
      const int k = l / Q, j = l % Q;
      double tbb[P], tdb[P], tbd[P];
#pragma unroll
      for (int a = 0; a < P; ++a) {
        tbb[a] = r2[k * S2 + j * PL + a];
        tdb[a] = r2[Q * S2 + k * S2 + j * PL + a];
        tbd[a] = r2[2 * Q * S2 + k * S2 + j * PL + a];
      }
      double wx[P] = {}, wy[P] = {}, wz[P] = {};
      const long long q0 = e * QQQ + (k * Q + j) * Q;
#pragma unroll
      for (int i = 0; i < Q; ++i) {
        double gx = 0, gy = 0, gz = 0;
#pragma unroll
        for (int a = 0; a < P; ++a) {
          gx += cD[i * P + a] * tbb[a];
          gy += cB[i * P + a] * tdb[a];
          gz += cB[i * P + a] * tbd[a];
        }
        const double xx = g0[q0 + i], xy = g1[q0 + i], xz = g2[q0 + i], yy = g3[q0 + i], yz = g4[q0 + i],
                     zz = g5[q0 + i];
        const double vx = xx * gx + xy * gy + xz * gz, vy = xy * gx + yy * gy + yz * gz,
                     vz = xz * gx + yz * gy + zz * gz;
#pragma unroll
        for (int a = 0; a < P; ++a) {
          wx[a] += cD[i * P + a] * vx;
          wy[a] += cB[i * P + a] * vy;
          wz[a] += cB[i * P + a] * vz;
        }
      }
#pragma unroll
      for (int a = 0; a < P; ++a) {  // (over the words it read: its own line's)
        r2[k * S2 + j * PL + a] = wx[a];
        r2[Q * S2 + k * S2 + j * PL + a] = wy[a];
        r2[2 * Q * S2 + k * S2 + j * PL + a] = wz[a];
      }
    }
    __syncthreads();
  }
  if (live && l < Q * P) {  // back along j: thread (k, a)
    const int k = l / P, a = l % P;
    double wx[Q], wy[Q], wz[Q];
#pragma unroll
    for (int j = 0; j < Q; ++j) {
      wx[j] = r2[k * S2 + j * PL + a];
      wy[j] = r2[Q * S2 + k * S2 + j * PL + a];
      wz[j] = r2[2 * Q * S2 + k * S2 + j * PL + a];
    }
#pragma unroll
    for (int b = 0; b < P; ++b) {
      double s = 0, z = 0;
#pragma unroll
      for (int j = 0; j < Q; ++j) {
        s += cB[j * P + b] * wx[j] + cD[j * P + b] * wy[j];
        z += cB[j * P + b] * wz[j];
      }
      r1[k * S1 + b * P + a] = s;
      r1[Q * S1 + k * S1 + b * P + a] = z;
    }
  }
  __syncthreads();
  if (live && l < P * P) {  // back along k: thread (b, a), y where it lies
    const int b = l / P, a = l % P;
    double ax[Q], az[Q];
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      ax[k] = r1[k * S1 + b * P + a];
      az[k] = r1[Q * S1 + k * S1 + b * P + a];
    }
#pragma unroll
    for (int c = 0; c < P; ++c) {
      double s = 0;
#pragma unroll
      for (int k = 0; k < Q; ++k) s += cB[k * P + c] * ax[k] + cD[k * P + c] * az[k];
      const long long at = e * PPP + (c * P + b) * P + a;
      if (MESH) atomicAdd(y + conn[at], s); else y[at] = s;
    }
  }
}

template <int P, int Q, bool MESH>
__global__ void __launch_bounds__(Q * Q * LinesLayout<P, Q, 1, 1>::NE) lines1(
    const double* __restrict__ u, const int* __restrict__ conn, const double* __restrict__ w,
    double* __restrict__ y, long long elements)
{
  using L = LinesLayout<P, Q, 1, 1>;
  constexpr int PPP = P * P * P, QQQ = Q * Q * Q, S1 = L::S1, S2 = L::S2, PL = L::PL;
  __shared__ double smem[L::NE * L::WORDS];
  const int el = threadIdx.x / (Q * Q), l = threadIdx.x % (Q * Q);
  const long long e = (long long)blockIdx.x * L::NE + el;
  const bool live = e < elements;
  double* const r1 = smem + el * L::WORDS;
  double* const r2 = r1 + L::R1;
  if (live && l < P * P) {
    const int b = l / P, a = l % P;
    double col[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
      const long long at = e * PPP + (c * P + b) * P + a;
      col[c] = MESH ? u[conn[at]] : u[at];
    }
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      double s = 0;
#pragma unroll
      for (int c = 0; c < P; ++c) s += cB[k * P + c] * col[c];
      r1[k * S1 + b * P + a] = s;
    }
  }
  __syncthreads();
  if (live && l < Q * P) {
    const int k = l / P, a = l % P;
    double x[P];
#pragma unroll
    for (int b = 0; b < P; ++b) x[b] = r1[k * S1 + b * P + a];
#pragma unroll
    for (int j = 0; j < Q; ++j) {
      double s = 0;
#pragma unroll
      for (int b = 0; b < P; ++b) s += cB[j * P + b] * x[b];
      r2[k * S2 + j * PL + a] = s;
    }
  }
  __syncthreads();
  if (live) {
    const int k = l / Q, j = l % Q;
    double t[P];
#pragma unroll
    for (int a = 0; a < P; ++a) t[a] = r2[k * S2 + j * PL + a];
    double acc[P] = {};
    const long long q0 = e * QQQ + (k * Q + j) * Q;
#pragma unroll
    for (int i = 0; i < Q; ++i) {
      double s = 0;
#pragma unroll
      for (int a = 0; a < P; ++a) s += cB[i * P + a] * t[a];
      const double v = s * w[q0 + i];
#pragma unroll
      for (int a = 0; a < P; ++a) acc[a] += cB[i * P + a] * v;
    }
#pragma unroll
    for (int a = 0; a < P; ++a) r2[k * S2 + j * PL + a] = acc[a];
  }
  __syncthreads();
  if (live && l < Q * P) {
    const int k = l / P, a = l % P;
    double x[Q];
#pragma unroll
    for (int j = 0; j < Q; ++j) x[j] = r2[k * S2 + j * PL + a];
#pragma unroll
    for (int b = 0; b < P; ++b) {
      double s = 0;
#pragma unroll
      for (int j = 0; j < Q; ++j) s += cB[j * P + b] * x[j];
      r1[k * S1 + b * P + a] = s;
    }
  }
  __syncthreads();
  if (live && l < P * P) {
    const int b = l / P, a = l % P;
    double x[Q];
#pragma unroll
    for (int k = 0; k < Q; ++k) x[k] = r1[k * S1 + b * P + a];
#pragma unroll
    for (int c = 0; c < P; ++c) {
      double s = 0;
#pragma unroll
      for (int k = 0; k < Q; ++k) s += cB[k * P + c] * x[k];
      const long long at = e * PPP + (c * P + b) * P + a;
      if (MESH) atomicAdd(y + conn[at], s); else y[at] = s;
    }
  }
}
