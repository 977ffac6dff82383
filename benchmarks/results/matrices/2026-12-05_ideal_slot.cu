// A slot of the P1 elasticity tangent's rows kernel in closed form, as lean as we wrote it: one slot
// (element e, its local node a) a thread; its element's four nodes in one load, their
// coordinates gathered, the reference gradients as literals, the Jacobian, its determinant
// and inverse, the four physical gradients, and the slot's block row (3 x 12 entries) added
// into its node's row in shared memory at the places of its four column blocks.
extern "C" __global__ void __launch_bounds__(96) ideal_slot(
    const float* __restrict__ X, const int* __restrict__ conn, const int* __restrict__ slots,
    const unsigned char* __restrict__ places, const float lam, const float mu, float* __restrict__ out,
    const int count)
{
  __shared__ float rows[4320];
  const int t = threadIdx.x;
  for (int w = t; w < 4320; w += 96) rows[w] = 0.f;
  __syncthreads();
  const int s = blockIdx.x * 96 + t;
  if (s < count) {
    const int slot = slots[s];
    const int a = slot & 3;
    const int4 n = *reinterpret_cast<const int4*>(conn + (slot - a));
    const int nodes[4] = {n.x, n.y, n.z, n.w};
    float x[4][3];
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int j = 0; j < 3; ++j) x[b][j] = X[nodes[b] * 3 + j];
    // J = [x1 - x0, x2 - x0, x3 - x0] (columns), the reference gradients' literals folded
    float J[3][3];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
      for (int c = 0; c < 3; ++c) J[i][c] = x[c + 1][i] - x[0][i];
    // cofactors C (row i, column c) of J; J^-1 = C^T / det, and the physical gradient of N_{c+1}
    // is row c of J^-1, (C[0][c], C[1][c], C[2][c]) / det
    float C[3][3];
    C[0][0] = J[1][1] * J[2][2] - J[1][2] * J[2][1];
    C[0][1] = J[1][2] * J[2][0] - J[1][0] * J[2][2];
    C[0][2] = J[1][0] * J[2][1] - J[1][1] * J[2][0];
    C[1][0] = J[0][2] * J[2][1] - J[0][1] * J[2][2];
    C[1][1] = J[0][0] * J[2][2] - J[0][2] * J[2][0];
    C[1][2] = J[0][1] * J[2][0] - J[0][0] * J[2][1];
    C[2][0] = J[0][1] * J[1][2] - J[0][2] * J[1][1];
    C[2][1] = J[0][2] * J[1][0] - J[0][0] * J[1][2];
    C[2][2] = J[0][0] * J[1][1] - J[0][1] * J[1][0];
    const float det = J[0][0] * C[0][0] + J[0][1] * C[0][1] + J[0][2] * C[0][2];
    const float r = 1.f / det;
    float g[4][3];
#pragma unroll
    for (int c = 0; c < 3; ++c)
#pragma unroll
      for (int j = 0; j < 3; ++j) g[c + 1][j] = C[j][c] * r;
#pragma unroll
    for (int j = 0; j < 3; ++j) g[0][j] = -(g[1][j] + g[2][j] + g[3][j]);
    const float V = det * (1.f / 6.f);
    // g_a by a select chain (a is the slot's own, so no array indexed at run time)
    float ga[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) ga[j] = a == 0 ? g[0][j] : a == 1 ? g[1][j] : a == 2 ? g[2][j] : g[3][j];
    float la[3], ma[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) { la[j] = V * lam * ga[j]; ma[j] = V * mu * ga[j]; }
    const unsigned char* const at = places + (long long)s * 4;
    float* const row = rows + (t % 32) * 3;  // (a stand-in for the slot's node's row)
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float d = ma[0] * g[b][0] + ma[1] * g[b][1] + ma[2] * g[b][2];
      const int p = at[b] * 9;
#pragma unroll
      for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
          const float k = la[i] * g[b][j] + ma[j] * g[b][i] + (i == j ? d : 0.f);
          row[(p + i * 3 + j) * 96] += k;
        }
    }
  }
  __syncthreads();
  for (int w = t; w < 4320; w += 96) out[(long long)blockIdx.x * 4320 + w] = rows[w];
}
