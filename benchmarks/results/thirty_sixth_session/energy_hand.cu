// The Neo-Hookean energy written by hand (gather_probe.py compiles it beside its gather kernels).
#include "assembly_kernels.cu"
// The energy written by hand: gather, W(F) per element, the block's sum as one partial.
extern "C" __global__ void __launch_bounds__(128) energy(const float* __restrict__ X, const float* __restrict__ u,
    const int* __restrict__ conn, float* __restrict__ partial, const float lam, const float mu, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  float W = 0.f;
  if (e < n) {
    int node[4]; float x[4][3], v[4][3], G[4][3];
    gather_element(X, u, conn, e, node, x, v);
    const float det = shape_gradients(x, G);
    float F[3][3];
    for (int i = 0; i < 3; ++i) for (int j = 0; j < 3; ++j) {
      float h = (i == j) ? 1.f : 0.f;
      for (int a = 0; a < 4; ++a) h += v[a][i] * G[a][j];
      F[i][j] = h;
    }
    const float J = F[0][0] * (F[1][1] * F[2][2] - F[1][2] * F[2][1]) - F[0][1] * (F[1][0] * F[2][2] - F[1][2] * F[2][0])
                  + F[0][2] * (F[1][0] * F[2][1] - F[1][1] * F[2][0]);
    float t = 0.f;
    for (int i = 0; i < 3; ++i) for (int j = 0; j < 3; ++j) t += F[i][j] * F[i][j];
    const float lj = logf(J);
    W = (0.5f * (mu * (t - 3.f) + lam * lj * lj) - mu * lj) * det * (1.f / 6.f);
  }
  for (int o = 16; o > 0; o >>= 1) W += __shfl_down_sync(0xffffffffu, W, o);
  __shared__ float part[4];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = W;
  __syncthreads();
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0] + part[1] + part[2] + part[3];
}
