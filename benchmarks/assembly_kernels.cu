// The P1 linear elasticity residual, hand-written: one thread per tetrahedron gathers its
// nodes' coordinates and displacements through the connectivity, computes the element's
// nodal forces and adds them into the nodal residual with atomicAdd (not reproducible: the
// order of the additions changes from run to run). The yardstick of issue 40.
//
//   J = X_e^T dN (dN: the reference gradients of the four barycentric shape functions),
//   G = dN J^-1, H = u_e^T G, eps = (H + H^T) / 2, sigma = lambda tr(eps) I + 2 mu eps,
//   f_e[a] = |det J| / 6 * sigma G[a],   r[conn[a]] += f_e[a].
// What both kernels do first: gather the element's nodes' coordinates x and displacements v
// through the connectivity, and the shape-function gradients G = dN J^-1 (rows 1..3 are the
// rows of J^-1, row 0 minus their sum) with det J, J = X_e^T dN.
__device__ __forceinline__ void gather_element(const float* __restrict__ X, const float* __restrict__ u,
                                               const int* __restrict__ conn, const long long e, int node[4],
                                               float x[4][3], float v[4][3])
{
  for (int a = 0; a < 4; ++a) {
    node[a] = conn[e * 4 + a];
    for (int i = 0; i < 3; ++i) {
      x[a][i] = X[(long long)node[a] * 3 + i];
      v[a][i] = u[(long long)node[a] * 3 + i];
    }
  }
}

__device__ __forceinline__ float shape_gradients(const float x[4][3], float G[4][3])
{
  // dN = [[-1,-1,-1],[1,0,0],[0,1,0],[0,0,1]]: J[i][j] = x[j+1][i] - x[0][i].
  float J[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) J[i][j] = x[j + 1][i] - x[0][i];
  const float c00 = J[1][1] * J[2][2] - J[1][2] * J[2][1], c01 = J[1][2] * J[2][0] - J[1][0] * J[2][2],
              c02 = J[1][0] * J[2][1] - J[1][1] * J[2][0];
  const float det = J[0][0] * c00 + J[0][1] * c01 + J[0][2] * c02;
  const float id = 1.0f / det;
  float Ji[3][3];  // J^-1
  Ji[0][0] = c00 * id; Ji[1][0] = c01 * id; Ji[2][0] = c02 * id;
  Ji[0][1] = (J[0][2] * J[2][1] - J[0][1] * J[2][2]) * id;
  Ji[1][1] = (J[0][0] * J[2][2] - J[0][2] * J[2][0]) * id;
  Ji[2][1] = (J[0][1] * J[2][0] - J[0][0] * J[2][1]) * id;
  Ji[0][2] = (J[0][1] * J[1][2] - J[0][2] * J[1][1]) * id;
  Ji[1][2] = (J[0][2] * J[1][0] - J[0][0] * J[1][2]) * id;
  Ji[2][2] = (J[0][0] * J[1][1] - J[0][1] * J[1][0]) * id;
  for (int j = 0; j < 3; ++j) {
    G[1][j] = Ji[0][j]; G[2][j] = Ji[1][j]; G[3][j] = Ji[2][j];
    G[0][j] = -(Ji[0][j] + Ji[1][j] + Ji[2][j]);
  }
  return det;
}

extern "C" __global__ void __launch_bounds__(128) p1_elastic_atomic(
    const float* __restrict__ X, const float* __restrict__ u, const int* __restrict__ conn,
    float* __restrict__ r, const float lambda, const float mu, const long long elements)
{
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= elements) return;
  int node[4];
  float x[4][3], v[4][3], G[4][3];
  gather_element(X, u, conn, e, node, x, v);
  const float det = shape_gradients(x, G);
  float H[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = 0.0f;
      for (int a = 0; a < 4; ++a) s += v[a][i] * G[a][j];
      H[i][j] = s;
    }
  const float tr = H[0][0] + H[1][1] + H[2][2];
  float S[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) S[i][j] = mu * (H[i][j] + H[j][i]) + (i == j ? lambda * tr : 0.0f);
  const float vol = fabsf(det) / 6.0f;
  for (int a = 0; a < 4; ++a)
    for (int i = 0; i < 3; ++i) {
      const float f = vol * (S[i][0] * G[a][0] + S[i][1] * G[a][1] + S[i][2] * G[a][2]);
      atomicAdd(&r[(long long)node[a] * 3 + i], f);
    }
}

// The compressible Neo-Hookean residual, hand-written the same way (one thread per
// tetrahedron, atomicAdd into r):
//   Jr = X_e^T dN, G = dN Jr^-1, F = I + u_e^T G, J = det F,
//   P = mu (F - F^-T) + lambda log(J) F^-T,  f_e[a] = det(Jr) / 6 * P G[a].
extern "C" __global__ void __launch_bounds__(128) neo_hookean_atomic(
    const float* __restrict__ X, const float* __restrict__ u, const int* __restrict__ conn,
    float* __restrict__ r, const float lambda, const float mu, const long long elements)
{
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= elements) return;
  int node[4];
  float x[4][3], v[4][3], G[4][3];
  gather_element(X, u, conn, e, node, x, v);
  const float det = shape_gradients(x, G);
  float F[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = i == j ? 1.0f : 0.0f;
      for (int a = 0; a < 4; ++a) s += v[a][i] * G[a][j];
      F[i][j] = s;
    }
  const float f00 = F[1][1] * F[2][2] - F[1][2] * F[2][1], f01 = F[1][2] * F[2][0] - F[1][0] * F[2][2],
              f02 = F[1][0] * F[2][1] - F[1][1] * F[2][0];
  const float detF = F[0][0] * f00 + F[0][1] * f01 + F[0][2] * f02;
  const float iF = 1.0f / detF;
  float FiT[3][3];  // F^-T: FiT[i][j] = (F^-1)[j][i], the cofactor of F[i][j] over det F
  FiT[0][0] = f00 * iF; FiT[0][1] = f01 * iF; FiT[0][2] = f02 * iF;
  FiT[1][0] = (F[0][2] * F[2][1] - F[0][1] * F[2][2]) * iF;
  FiT[1][1] = (F[0][0] * F[2][2] - F[0][2] * F[2][0]) * iF;
  FiT[1][2] = (F[0][1] * F[2][0] - F[0][0] * F[2][1]) * iF;
  FiT[2][0] = (F[0][1] * F[1][2] - F[0][2] * F[1][1]) * iF;
  FiT[2][1] = (F[0][2] * F[1][0] - F[0][0] * F[1][2]) * iF;
  FiT[2][2] = (F[0][0] * F[1][1] - F[0][1] * F[1][0]) * iF;
  const float ll = lambda * logf(detF);
  float P[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) P[i][j] = mu * (F[i][j] - FiT[i][j]) + ll * FiT[i][j];
  const float vol = det / 6.0f;
  for (int a = 0; a < 4; ++a)
    for (int i = 0; i < 3; ++i) {
      const float f = vol * (P[i][0] * G[a][0] + P[i][1] * G[a][1] + P[i][2] * G[a][2]);
      atomicAdd(&r[(long long)node[a] * 3 + i], f);
    }
}

// The P1 linear elasticity tangent assembled into CSR values, hand-written, owner-computes:
// one thread per node adds the blocks of every element naming it into the node's three rows,
// kept in shared memory, then the block writes its nodes' rows (one contiguous stretch of the
// CSR values) coalesced. No partial sums leave the chip and each entry is summed by one thread
// in the node's element order, so every run gives the same bits. The element's shape
// gradients are computed once for each of its four nodes. The yardstick of the assembly
// (issue 73): what a kernel that writes the values once reaches.
//
//   K[a][i][b][j] = vol (mu (G[a] . G[b]) d_ij + mu G[a][j] G[b][i] + lambda G[a][i] G[b][j]),
//   vol = det J / 6: d fe[a][i] / d u[b][j] of examples/mesh/p1_residual.kas.
// `slots` lists (element * 4 + local node) by node, elements ascending (`first[n]` to
// `first[n + 1]`); the pattern is irfuse's (`irfuse.mesh.assembly`): node row n * 3 + i holds
// its blocks' three columns in turn, blocks ordered by column node.
// STAGED: each thread's row's column nodes copied into shared memory first (at most
// TANGENT_ROW_BLOCKS of them), the searches made there instead of in the CSR indices. SPLIT:
// threads a node, each adding rows i = part, part + SPLIT, ... of the node's three (SPLIT = 3:
// a row a thread, three times the threads, the element's gradients computed by each).
#define TANGENT_ROW_BLOCKS 32
template <bool STAGED, int SPLIT>
__device__ __forceinline__ void tangent_rows(
    const float* __restrict__ X, const int* __restrict__ conn, const int* __restrict__ first,
    const int* __restrict__ slots, const int* __restrict__ indptr, const int* __restrict__ indices,
    float* __restrict__ values, const float lambda, const float mu, const int nodes)
{
  extern __shared__ float rows[];
  const int per = blockDim.x / SPLIT, part = threadIdx.x % SPLIT;
  const int n0 = blockIdx.x * per, n1 = min(n0 + per, nodes);
  const int base = indptr[3 * n0], end = indptr[3 * n1];
  int* staged = (int*)(rows + (end - base));  // (STAGED) TANGENT_ROW_BLOCKS words a thread
  for (int k = threadIdx.x; k < end - base; k += blockDim.x) rows[k] = 0.0f;
  const int n = n0 + threadIdx.x / SPLIT;
  int row = 0, width = 0;
  if (n < n1) {
    row = indptr[3 * n];
    width = indptr[3 * n + 1] - row;  // 3 x its blocks
    if (STAGED)
      for (int p = 0; p < width / 3; ++p) staged[threadIdx.x * TANGENT_ROW_BLOCKS + p] = indices[row + 3 * p] / 3;
  }
  __syncthreads();
  if (n < n1) {
    const int* __restrict__ cols = indices + row;  // cols[3 p] = 3 * (block p's column node)
    float* own = rows + (row - base);
    for (int s = first[n]; s < first[n + 1]; ++s) {
      const int slot = slots[s], e = slot >> 2, a = slot & 3;
      int node[4];
      float x[4][3], G[4][3];
      for (int b = 0; b < 4; ++b) {
        node[b] = conn[(long long)e * 4 + b];
        for (int i = 0; i < 3; ++i) x[b][i] = X[(long long)node[b] * 3 + i];
      }
      const float vol = shape_gradients(x, G) / 6.0f;
      float ga[3];
      for (int i = 0; i < 3; ++i) ga[i] = vol * G[a][i];
      for (int b = 0; b < 4; ++b) {
        int lo = 0, hi = width / 3 - 1;  // the block of column node[b]: a search of the row
        while (lo < hi) {
          const int mid = (lo + hi) >> 1;
          const int c = STAGED ? staged[threadIdx.x * TANGENT_ROW_BLOCKS + mid] : cols[3 * mid] / 3;
          if (c < node[b]) lo = mid + 1; else hi = mid;
        }
        const float dot = ga[0] * G[b][0] + ga[1] * G[b][1] + ga[2] * G[b][2];
        for (int i = part; i < 3; i += SPLIT)
          for (int j = 0; j < 3; ++j)
            own[i * width + 3 * lo + j] += mu * (i == j ? dot : 0.0f) + mu * ga[j] * G[b][i] + lambda * ga[i] * G[b][j];
      }
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < end - base; k += blockDim.x) values[base + k] = rows[k];
}

extern "C" __global__ void __launch_bounds__(128) p1_elastic_tangent_rows(
    const float* __restrict__ X, const int* __restrict__ conn, const int* __restrict__ first,
    const int* __restrict__ slots, const int* __restrict__ indptr, const int* __restrict__ indices,
    float* __restrict__ values, const float lambda, const float mu, const int nodes)
{
  tangent_rows<false, 1>(X, conn, first, slots, indptr, indices, values, lambda, mu, nodes);
}

extern "C" __global__ void __launch_bounds__(128) p1_elastic_tangent_rows_staged(
    const float* __restrict__ X, const int* __restrict__ conn, const int* __restrict__ first,
    const int* __restrict__ slots, const int* __restrict__ indptr, const int* __restrict__ indices,
    float* __restrict__ values, const float lambda, const float mu, const int nodes)
{
  tangent_rows<true, 1>(X, conn, first, slots, indptr, indices, values, lambda, mu, nodes);
}

extern "C" __global__ void __launch_bounds__(384) p1_elastic_tangent_rows_split(
    const float* __restrict__ X, const int* __restrict__ conn, const int* __restrict__ first,
    const int* __restrict__ slots, const int* __restrict__ indptr, const int* __restrict__ indices,
    float* __restrict__ values, const float lambda, const float mu, const int nodes)
{
  tangent_rows<true, 3>(X, conn, first, slots, indptr, indices, values, lambda, mu, nodes);
}
