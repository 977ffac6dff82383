// RUN: irfuse-opt %s -p fuse-remap-threads | filecheck %s
// RUN: irfuse-opt %s -p fuse-remap-threads -t cuda | filecheck %s --check-prefix=CUDA
// A call using fewer threads per element than the kernel (venorm3[elem], bx 1, in a bx = 3
// kernel) is marked for remapping; calls using the kernel's bx are left alone.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (%s: !kas.scalar, %B: !kas.matrix<3x3>) {
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
// CHECK-NEXT: fuse.call @venorm3[elem](%w) into shared[168] : (!kas.vector<3>) -> !kas.scalar {remap}
// CUDA: if (active) irf_mmul33_row_sss(tx, ty, smem + 0, smem + 0, smem + 96);
// CUDA: // venorm3[elem] into shared[168], threads remapped
// CUDA-NEXT: { const int tx_c = tid % 1, ty_c = tid / 1; if (ty_c < count) irf_venorm3_elem_ss(tx_c, ty_c, smem + 72, smem + 168); }
