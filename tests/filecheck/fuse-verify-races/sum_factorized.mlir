// RUN: irfuse-opt %s -p fuse-remap-threads,fuse-promote-registers,fuse-linearize,fuse-allocate-shared,fuse-place-barriers,fuse-verify-races | filecheck %s
// RUN: irfuse-opt %s -p fuse-remap-threads,fuse-promote-registers,fuse-linearize,fuse-allocate-shared,fuse-place-barriers,fuse-verify-races -t cuda | filecheck %s --check-prefix=CUDA
// A sum-factorized element operator (BK1, the mass matrix, at order 2 with 4 Gauss points an
// axis: 3x3x3 nodal values, 4x4x4 point values) spread over 16 threads an element, one a line
// along each tensor's first index, through every in-kernel pass as fuse-partition emits it (every
// value at its own offset, a barrier after every call). The calls of 9 and 12 lines run on the
// block's threads remapped; a value made and read by the same threads' lines stays in their
// registers (uq on 16 lines, s2 on 9), and the barrier between s2 and its reader goes with it;
// the intermediates share the words of values no longer read, padded where that spreads the
// lines' accesses over the banks; the race proof accepts the result.
builtin.module {
  fuse.kernel @bk1 block(bx = 16, by = 8) uniform(0) (%B: !kas.matrix<4x3>, %U: !kas.tensor<3x3x3>, %W: !kas.tensor<4x4x4>) -> (%Y: !kas.tensor<3x3x3>) {
    %b = fuse.load %B into uniform : !kas.matrix<4x3>
    %u = fuse.load %U into shared[0] : !kas.tensor<3x3x3>
    %w = fuse.load %W into shared[216] : !kas.tensor<4x4x4>
    fuse.barrier
    %t1 = fuse.call @contract_kc_cba_kba_4x3_3x3x3[line](%b, %u) into shared[728] : (!kas.matrix<4x3>, !kas.tensor<3x3x3>) -> !kas.tensor<4x3x3>
    fuse.barrier
    %t2 = fuse.call @contract_jb_kba_kja_4x3_4x3x3[line](%b, %t1) into shared[1016] : (!kas.matrix<4x3>, !kas.tensor<4x3x3>) -> !kas.tensor<4x4x3>
    fuse.barrier
    %uq = fuse.call @contract_ia_kja_kji_4x3_4x4x3[line](%b, %t2) into shared[1400] : (!kas.matrix<4x3>, !kas.tensor<4x4x3>) -> !kas.tensor<4x4x4>
    fuse.barrier
    %vq = fuse.call @contract_kji_kji_kji_4x4x4_4x4x4[line](%uq, %w) into shared[1912] : (!kas.tensor<4x4x4>, !kas.tensor<4x4x4>) -> !kas.tensor<4x4x4>
    fuse.barrier
    %s1 = fuse.call @contract_ia_kji_kja_4x3_4x4x4[line](%b, %vq) into shared[2424] : (!kas.matrix<4x3>, !kas.tensor<4x4x4>) -> !kas.tensor<4x4x3>
    fuse.barrier
    %s2 = fuse.call @contract_jb_kja_kba_4x3_4x4x3[line](%b, %s1) into shared[2808] : (!kas.matrix<4x3>, !kas.tensor<4x4x3>) -> !kas.tensor<4x3x3>
    fuse.barrier
    %y = fuse.call @contract_kc_kba_cba_4x3_4x3x3[line](%b, %s2) into shared[3096] : (!kas.matrix<4x3>, !kas.tensor<4x3x3>) -> !kas.tensor<3x3x3>
    fuse.barrier
    fuse.store %y to %Y : !kas.tensor<3x3x3>
  }
}
// CHECK:      %b = fuse.load %B into uniform : !kas.matrix<4x3>
// CHECK-NEXT: %u = fuse.load %U into shared[0] : !kas.tensor<3x3x3>
// CHECK-NEXT: %w = fuse.load %W into shared[520] : !kas.tensor<4x4x4>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %t1 = fuse.call @contract_kc_cba_kba_4x3_3x3x3[line](%b, %u) into shared[1032, pitch 37] {{.*}} {remap}
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %t2 = fuse.call @contract_jb_kba_kja_4x3_4x3x3[line](%b, %t1) into shared[0] {{.*}} {remap}
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %uq = fuse.call @contract_ia_kja_kji_4x3_4x4x3[line](%b, %t2) into reg : (!kas.matrix<4x3>, !kas.tensor<4x4x3>) -> !kas.tensor<4x4x4>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %vq = fuse.call @contract_kji_kji_kji_4x4x4_4x4x4[line](%uq, %w) into shared[0, pitch 65] : (!kas.tensor<4x4x4>, !kas.tensor<4x4x4>) -> !kas.tensor<4x4x4>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %s1 = fuse.call @contract_ia_kji_kja_4x3_4x4x4[line](%b, %vq) into shared[520, pitch 50] {{.*}} {remap}
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %s2 = fuse.call @contract_jb_kja_kba_4x3_4x4x3[line](%b, %s1) into reg {{.*}} {remap}
// CHECK-NEXT: %y = fuse.call @contract_kc_kba_cba_4x3_4x3x3[line](%b, %s2) into shared[0] {{.*}} {remap}
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %y to %Y : !kas.tensor<3x3x3>
// CHECK-NEXT: } {barriers_before = #builtin.int<8>}
// CUDA:      __launch_bounds__(128, {{[0-9]+}}) bk1(
// CUDA:      { const int tx_c = tid % 9, ty_c = tid / 9; if (ty_c < count) irf_contract_kc_cba_kba_4x3_3x3x3_line_uss(tx_c, ty_c, irf_u0, smem + 0, smem + 1032 + ty_c*1); }
// CUDA-NEXT: __syncthreads();
// CUDA:      { const int tx_c = tid % 12, ty_c = tid / 12; if (ty_c < count) irf_contract_jb_kba_kja_4x3_4x3x3_line_uss(
// CUDA:      if (active) irf_contract_ia_kja_kji_4x3_4x4x3_line_usr(tx, ty, irf_u0, smem + 0, r_uq);
// CUDA:      if (active) irf_contract_kji_kji_kji_4x4x4_4x4x4_line_rss(tx, ty, r_uq, smem + 520, smem + 0 + ty*1);
// CUDA:      irf_contract_jb_kja_kba_4x3_4x4x3_line_usr(tx_c, ty_c, irf_u0, smem + 520 + ty_c*2, r_s2); }
// CUDA-NOT:  __syncthreads();
// CUDA:      irf_contract_kc_kba_cba_4x3_4x3x3_line_urs(tx_c, ty_c, irf_u0, r_s2, smem + 0); }
// CUDA-NEXT: __syncthreads();
