// RUN: irfuse-opt %s -p fuse-each -t cuda | filecheck %s
// A table of the program (a uniform input fixed when compiling, `constants=`) reaches each
// kernel that reads it as an array of the module's: `__constant__` before the GPU kernel (the
// constant bank, which the arithmetic reads as operands), `static const` before its CPU twin,
// each word written exactly (a hexadecimal double cast to the element type); no block copy into
// shared memory, and the device functions take the array where they took the copy. A uniform
// input given at the call keeps its block copy. The host still writes the table's words and
// the launch still passes them (the launch interface is unchanged).
builtin.module {
  kas.program @tables(%e: !kas.matrix<3x3>, %G: !kas.matrix<3x3>) -> (s : !kas.matrix<3x3>, t : !kas.matrix<3x3>) uniform(G) {
    %M = kas.table [1.0, 0.5, 0.0, 0.0, 2.0, 0.1, 0.0, 0.0, 3.0] : !kas.matrix<3x3>
    %s = kas.call @mmul33(%e, %M) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = kas.call @mmul33(%e, %G) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %s, %t : !kas.matrix<3x3>, !kas.matrix<3x3>
  }
}
// CHECK:      __constant__ real_t irf_t_tables_k0_mmul33_0[9] = {(real_t)0x1.0000000000000p+0, (real_t)0x1.0000000000000p-1, (real_t)0x0.0p+0, (real_t)0x0.0p+0, (real_t)0x1.0000000000000p+1, (real_t)0x1.999999999999ap-4, (real_t)0x0.0p+0, (real_t)0x0.0p+0, (real_t)0x1.8000000000000p+1};
// CHECK-NEXT: // fuse.kernel @tables_k0_mmul33
// CHECK:      extern "C" __global__ void __launch_bounds__({{.*}}) tables_k0_mmul33(const real_t* __restrict__ g_e, const real_t* __restrict__ [[SECOND:g_[A-Za-z_0-9]*]], real_t* __restrict__
// CHECK-NOT:    irf_u0
// CHECK-NOT:    [[SECOND]][tid]
// CHECK:        irf_mmul33_elem_{{[a-z]*}}(tx, ty, {{.*}}, irf_t_tables_k0_mmul33_0, {{.*}});
// CHECK:      static const real_t irf_t_tables_k0_mmul33_0[9] = {(real_t)0x1.0000000000000p+0,
// CHECK-NEXT: // fuse.kernel @tables_k0_mmul33 on the CPU
// CHECK:      extern "C" __global__ void __launch_bounds__({{.*}}) tables_k1_mmul33(
// CHECK-NOT:    irf_t_
// CHECK:        irf_u0[tid] = g_G[tid];
// CHECK:        irf_mmul33_elem_{{[a-z]*}}(tx, ty, {{.*}}, irf_u0, {{.*}});
