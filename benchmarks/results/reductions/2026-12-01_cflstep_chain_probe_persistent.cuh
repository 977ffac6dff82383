// Record of benchmarks/NOTES.md, 2026-12-01 (What bounds CflStep at 4 M elements): included by
// 2026-12-01_cflstep_chain_probe.cu as persistent.cuh, after the emitted prelude (irf_max).
// CflStep in one kernel whose blocks stay resident across the global barrier (all of them fit
// on the GPU at once: the grid is the occupancy's blocks an SM times the SMs): each block takes
// the maximum of |v| over its grid-stride share, writes it, waits at a barrier of an arrival
// count and a generation word, takes the maximum of every block's, and updates its share of x.
#ifndef IRFUSE_HOST
__device__ unsigned irf_bar_count = 0, irf_bar_gen = 0;

__device__ __forceinline__ float block_max(float m, float* red)
{
  for (int o = 16; o > 0; o >>= 1) m = irf_max(m, __shfl_down_sync(0xffffffffu, m, o));
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  __syncthreads();
  if (l == 0) red[w] = m;
  __syncthreads();
  if (w == 0) {
    m = l < (int)(blockDim.x / 32) ? red[l] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) m = irf_max(m, __shfl_down_sync(0xffffffffu, m, o));
    if (l == 0) red[0] = m;
  }
  __syncthreads();
  return red[0];
}

template <int U>
__global__ void __launch_bounds__(256) cfl_persistent(const float* __restrict__ v, const float* __restrict__ x,
    float* __restrict__ xn, const float* __restrict__ cfl, float* __restrict__ parts, float* __restrict__ dt_out,
    const long long n, const int reverse)
{
  __shared__ float red[32];
  const int t = threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  float m = -INFINITY;
#pragma unroll U
  for (long long i = (long long)blockIdx.x * blockDim.x + t; i < n; i += stride) {
    const float a = v[3 * i], b = v[3 * i + 1], c = v[3 * i + 2];
    m = irf_max(m, (float)sqrt((((a * a) + (b * b)) + (c * c))));
  }
  m = block_max(m, red);
  if (t == 0) {
    volatile unsigned* gen = &irf_bar_gen;
    const unsigned g = *gen;
    parts[blockIdx.x] = m;
    __threadfence();
    if (atomicAdd(&irf_bar_count, 1u) == gridDim.x - 1) {
      irf_bar_count = 0;
      __threadfence();
      atomicAdd(&irf_bar_gen, 1u);
    } else {
      while (*gen == g) __nanosleep(20);
    }
    __threadfence();
  }
  __syncthreads();
  float a = -INFINITY;
  for (int j = t; j < (int)gridDim.x; j += blockDim.x) a = irf_max(a, ((volatile float*)parts)[j]);
  const float vmax = block_max(a, red);
  const float dt = cfl[0] / vmax;
  if (blockIdx.x == 0 && t == 0) dt_out[0] = dt;
#pragma unroll U
  for (long long k = (long long)blockIdx.x * blockDim.x + t; k < n; k += stride) {
    const long long i = reverse ? n - 1 - k : k;
    const float s0 = v[3 * i] * dt, s1 = v[3 * i + 1] * dt, s2 = v[3 * i + 2] * dt;
    xn[3 * i] = x[3 * i] + s0;
    xn[3 * i + 1] = x[3 * i + 1] + s1;
    xn[3 * i + 2] = x[3 * i + 2] + s2;
  }
}
#endif
