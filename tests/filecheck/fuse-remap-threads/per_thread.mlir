// RUN: irfuse-opt %s -p fuse-remap-threads | filecheck %s
// RUN: irfuse-opt %s -p fuse-remap-threads -t cuda | filecheck %s --check-prefix=CUDA
// In a kernel whose threads run several elements each, no call is remapped (every element
// keeps its thread row): venorm3[elem] (bx 1, in a bx = 3 kernel) runs on the threads with
// tx = 0 of each row, for each of the row's elements.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8, elements_per_thread = 2) (%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (%s: !kas.scalar, %B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %w = fuse.load %v into shared[72] : !kas.vector<3>
    fuse.barrier
    %b = fuse.call @mmul33[row](%a, %a) into shared[96] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %r = fuse.call @venorm3[elem](%w) into shared[168] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %r to %s : !kas.scalar
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK:      fuse.call @mmul33[row](%a, %a) into shared[96] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT: fuse.call @venorm3[elem](%w) into shared[168] : (!kas.vector<3>) -> !kas.scalar
// CHECK-NOT:  remap
// CUDA:      __launch_bounds__(12, {{[0-9]+}}) k(
// CUDA:      IRF_UNROLL for (int irf_e = 0; irf_e < 2; ++irf_e) { const int irf_y = ty + irf_e * 4; if (irf_y < count) irf_mmul33_row_sss(tx, irf_y, smem + 0, smem + 0, smem + 96); }
// CUDA:      IRF_UNROLL for (int irf_e = 0; irf_e < 2; ++irf_e) { const int irf_y = ty + irf_e * 4; if (irf_y < count && tx < 1) irf_venorm3_elem_ss(tx, irf_y, smem + 72, smem + 168); }
