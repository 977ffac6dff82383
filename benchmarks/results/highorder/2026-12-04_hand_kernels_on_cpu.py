"""The bake-off's hand-written BK3 kernels (`benchmarks/bakeoff_kernels.cu`: a block an element,
lines, lines with the factors read coalesced) run on the CPU against the float64 einsum form of
the operator (`bakeoff.element_operator`), random tables and factors, at orders 3, 6 and 7 with
element counts that leave the last block short:

    python benchmarks/results/highorder/2026-12-04_hand_kernels_on_cpu.py

Each kernel is compiled by g++ (C++20) with a block's threads as std::threads meeting at a
std::barrier for __syncthreads, its shared arrays as statics, one block at a time: a check of
their arithmetic and of their barriers' places where no GPU is at hand, not of their speed."""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from bakeoff import HAND, element_operator  # noqa: E402

HARNESS = r"""
// Runs the bake-off's hand-written kernels on the CPU: a block at a time, its threads as
// std::threads meeting at a std::barrier for __syncthreads, shared arrays as statics.
#include <barrier>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
#include <fstream>
struct dim3 { unsigned x = 0, y = 0, z = 0; };
thread_local dim3 threadIdx;
dim3 blockIdx;
std::barrier<>* g_barrier;
std::mutex g_atomic;
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__
inline void __syncthreads() { g_barrier->arrive_and_wait(); }
inline double atomicAdd(double* p, double v) { std::lock_guard<std::mutex> l(g_atomic); double o = *p; *p = o + v; return o; }
#include KERNELS

template <typename F> void launch(long long grid, int tx, int ty, F body) {
  for (long long b = 0; b < grid; ++b) {
    blockIdx.x = (unsigned)b;
    std::barrier<> bar(tx * ty);
    g_barrier = &bar;
    std::vector<std::thread> ts;
    for (int y = 0; y < ty; ++y) for (int x = 0; x < tx; ++x)
      ts.emplace_back([=] { threadIdx.x = x; threadIdx.y = y; body(); });
    for (auto& t : ts) t.join();
  }
}
static std::vector<double> read(const char* name, size_t n) {
  std::vector<double> v(n); std::ifstream f(name, std::ios::binary); f.read((char*)v.data(), n * 8); return v;
}
static void write(const char* name, const std::vector<double>& v) {
  std::ofstream f(name, std::ios::binary); f.write((const char*)v.data(), v.size() * 8);
}
int main() {
  constexpr int P = EMU_P, Q = EMU_Q;
  const long long E = EMU_E;
  auto u = read("u.bin", E * P * P * P), B = read("B.bin", Q * P), D = read("D.bin", Q * P);
  std::vector<std::vector<double>> g(6);
  for (int m = 0; m < 6; ++m) { char n[16]; snprintf(n, 16, "g%d.bin", m); g[m] = read(n, E * Q * Q * Q); }
  for (int k = 0; k < Q * P; ++k) { cB[k] = B[k]; cD[k] = D[k]; }
  std::vector<double> y(E * P * P * P);
  launch(E, Q, Q, [&] { bake3<P, Q, false>(u.data(), nullptr, B.data(), D.data(), g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), g[5].data(), y.data()); });
  write("y_block.bin", y);
  using L = LinesLayout<P, Q, 2, 3>;
  launch((E + L::NE - 1) / L::NE, L::NE * Q * Q, 1, [&] { lines3<P, Q, false>(u.data(), nullptr, g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), g[5].data(), y.data(), E); });
  write("y_lines.bin", y);
  using V = LinesLayout<P, Q, 2, 3, 3 * Q * Q * (Q % 2 ? Q : Q + 1), true>;
  launch((E + V::NE - 1) / V::NE, V::NE * Q * Q, 1, [&] { lines3<P, Q, false, true>(u.data(), nullptr, g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), g[5].data(), y.data(), E); });
  write("y_coalesced.bin", y);
  std::printf("NE lines %d, coalesced %d\n", L::NE, V::NE);
}
"""


def main() -> int:
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "emulate.cpp"), "w") as f:
            f.write(HARNESS)
        for p, elements in ((3, 13), (6, 5), (7, 3)):
            P, Q = p + 1, p + 2
            rng = np.random.default_rng(p)
            u = rng.standard_normal((elements, P, P, P))
            B, D = rng.standard_normal((Q, P)), rng.standard_normal((Q, P))
            g = [rng.standard_normal((elements, Q, Q, Q)) for _ in range(6)]
            for name, a in (("u", u), ("B", B), ("D", D), *((f"g{m}", g[m]) for m in range(6))):
                np.ascontiguousarray(a).tofile(os.path.join(tmp, f"{name}.bin"))
            want = element_operator(np.einsum, "bk3", u, B, D, np.stack(g, axis=1))
            exe = os.path.join(tmp, f"emulate_p{p}")
            subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-w", f'-DKERNELS="{HAND}"', f"-DEMU_P={P}",
                            f"-DEMU_Q={Q}", f"-DEMU_E={elements}", os.path.join(tmp, "emulate.cpp"), "-o", exe],
                           check=True)
            subprocess.run([exe], check=True, cwd=tmp, capture_output=True)
            for form in ("block", "lines", "coalesced"):
                got = np.fromfile(os.path.join(tmp, f"y_{form}.bin")).reshape(want.shape)
                error = float(np.abs(got - want).max() / np.abs(want).max())
                worst = max(worst, error)
                print(f"p={p}, {elements} elements, {form}: relative error {error:.1e}")
    return 0 if worst < 1e-13 else 1


if __name__ == "__main__":
    sys.exit(main())
