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
