// RUN: irfuse-opt %s -t cuda | filecheck %s
// A kernel launched twice reads a literal only where both launches give the same number:
// @twice gets 0.5 from two constants of that value (a literal), @differs gets 0.5 and 2.0
// (it keeps the block copy of the word each launch passes).
builtin.module {
  fuse.kernel @twice block(bx = 1, by = 128) uniform(1) (%e: !kas.matrix<3x3>, %0: !kas.scalar) -> (%s: !kas.matrix<3x3>) {
    %e_1 = fuse.load %e into shared[0] : !kas.matrix<3x3>
    %1 = fuse.load %0 into uniform : !kas.scalar
    fuse.barrier
    %s_1 = fuse.call @scale_3x3_s[elem](%e_1, %1) into shared[1152] : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %s_1 to %s : !kas.matrix<3x3>
  }
  fuse.kernel @differs block(bx = 1, by = 128) uniform(1) (%e: !kas.matrix<3x3>, %0: !kas.scalar) -> (%s: !kas.matrix<3x3>) {
    %e_1 = fuse.load %e into shared[0] : !kas.matrix<3x3>
    %1 = fuse.load %0 into uniform : !kas.scalar
    fuse.barrier
    %s_1 = fuse.call @scale_3x3_s[elem](%e_1, %1) into shared[1152] : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %s_1 to %s : !kas.matrix<3x3>
  }
  kas.program @launches(%e: !kas.matrix<3x3>) -> (a : !kas.matrix<3x3>, b : !kas.matrix<3x3>, c : !kas.matrix<3x3>, d : !kas.matrix<3x3>) {
    %half = kas.constant 0.5 : !kas.scalar
    %also = kas.constant 0.5 : !kas.scalar
    %two = kas.constant 2.0 : !kas.scalar
    %a = fuse.launch @twice(%e, %half) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %b = fuse.launch @twice(%e, %also) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %c = fuse.launch @differs(%e, %half) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %d = fuse.launch @differs(%e, %two) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    kas.return %a, %b, %c, %d : !kas.matrix<3x3>, !kas.matrix<3x3>, !kas.matrix<3x3>, !kas.matrix<3x3>
  }
}
// CHECK:      extern "C" __global__ void __launch_bounds__({{.*}}) twice(
// CHECK:        const real_t irf_c0[1] = {(real_t)0x1.0000000000000p-1};
// CHECK:        irf_scale_3x3_s_elem_{{[a-z]*}}(tx, ty, {{.*}}, irf_c0, {{.*}});
// CHECK:      extern "C" __global__ void __launch_bounds__({{.*}}) differs(
// CHECK-NOT:    irf_c0
// CHECK:        irf_u0[tid] = g_{{[a-z_0-9]*}}[tid];
// CHECK:        irf_scale_3x3_s_elem_{{[a-z]*}}(tx, ty, {{.*}}, irf_u0, {{.*}});
