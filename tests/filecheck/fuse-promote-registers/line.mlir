// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s -p fuse-promote-registers -t cuda | filecheck %s --check-prefix=CUDA
// A line mapping (one thread per line along the result's first index: 16 threads for a 5x4x4
// result, each holding the 5 words k of its line (b, a)): a value made and read by line calls
// of the same threads goes to registers, each thread computing its line from the 4 words of u
// on it (offsets 0, 16, 32, 48 past its line's first word).
builtin.module {
  fuse.kernel @k block(bx = 16, by = 8) (%B: !kas.matrix<5x4>, %U: !kas.tensor<4x4x4>) -> (%Y: !kas.tensor<5x4x4>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<5x4>
    %u = fuse.load %U into shared[160] : !kas.tensor<4x4x4>
    fuse.barrier
    %z = fuse.call @contract_kc_cba_kba_5x4_4x4x4[line](%b, %u) into shared[672] : (!kas.matrix<5x4>, !kas.tensor<4x4x4>) -> !kas.tensor<5x4x4>
    %y = fuse.call @add_5x4x4_5x4x4[line](%z, %z) into shared[1312] : (!kas.tensor<5x4x4>, !kas.tensor<5x4x4>) -> !kas.tensor<5x4x4>
    fuse.barrier
    fuse.store %y to %Y : !kas.tensor<5x4x4>
  }
}
// CHECK:      %z = fuse.call @contract_kc_cba_kba_5x4_4x4x4[line](%b, %u) into reg
// CHECK-NEXT: %y = fuse.call @add_5x4x4_5x4x4[line](%z, %z) into shared[1312]
// CUDA:       [line: one thread per line along the first index; variant rrs]
// CUDA:       const real_t r0 = (A[0] + B[0]);
// CUDA-NEXT:  const real_t r1 = (A[16] + B[16]);
// CUDA:       const real_t r4 = (A[64] + B[64]);
// CUDA:       [line: one thread per line along the first index; variant ssr]
// CUDA:       const real_t r0 = ((((X0[ty*20] * X1[ty*64 + (tx%4) + (tx/4)*4]) + (X0[ty*20 + 1] * X1[ty*64 + (tx%4) + (tx/4)*4 + 16])) + (X0[ty*20 + 2] * X1[ty*64 + (tx%4) + (tx/4)*4 + 32])) + (X0[ty*20 + 3] * X1[ty*64 + (tx%4) + (tx/4)*4 + 48]));
// CUDA:       __launch_bounds__(128, {{[0-9]+}}) k(
// CUDA:       if (active) irf_contract_kc_cba_kba_5x4_4x4x4_line_ssr(tx, ty, smem + 0, smem + 160, r_z);
// CUDA:       if (active) irf_add_5x4x4_5x4x4_line_rrs(tx, ty, r_z, r_z, smem + 1312);
