// RUN: irfuse-opt %s --split-input-file -p fuse-place-barriers | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p fuse-place-barriers -t cuda | filecheck %s --check-prefix=CUDA
// A scalar's reduction tree over more than 64 elements takes its first step from the value's
// shared words: thread t reads elements i and i + half for every i = t modulo the threads.
// With one element a thread, element i + half was written by another thread: a barrier.
// With four elements a thread on 64 threads (by = 256, half = 128), elements i and i + 128
// both belong to thread i % 64, which wrote them: no barrier.
builtin.module {
  fuse.kernel @one block(bx = 1, by = 256) (%V: !kas.vector<3>) -> (%S: !kas.scalar) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    fuse.barrier
    %s = fuse.call @venorm3[elem](%v) into shared[768] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %S reduce max : !kas.scalar
  }
}
// CHECK:      %s = fuse.call @venorm3[elem](%v) into shared[768]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %s to %S reduce max : !kas.scalar

// -----
builtin.module {
  fuse.kernel @four block(bx = 1, by = 256, elements_per_thread = 4) (%V: !kas.vector<3>) -> (%S: !kas.scalar) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    fuse.barrier
    %s = fuse.call @venorm3[elem](%v) into shared[768] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %S reduce max : !kas.scalar
  }
}
// CHECK:      %v = fuse.load %V into shared[0] : !kas.vector<3>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %s = fuse.call @venorm3[elem](%v) into shared[768]
// CHECK-NEXT: fuse.store %s to %S reduce max : !kas.scalar
// CUDA:       IRF_UNROLL for (int irf_e = 0; irf_e < 4; ++irf_e) { const int irf_y = ty + irf_e * 64; if (irf_y < count) irf_venorm3_elem_ss(tx, irf_y, smem + 0, smem + 768); }
// CUDA-NEXT:  // max of s over the block's elements into S's partials
// CUDA-NEXT:  for (int irf_i = tid; irf_i < 128; irf_i += 64) irf_red0[irf_i] = irf_i + 128 < count ? irf_max(smem[768 + irf_i], smem[896 + irf_i]) : smem[768 + irf_i];

// -----
// A vector's tree copies it into a staging array first (a block copy by any thread): a barrier.
builtin.module {
  fuse.kernel @vector block(bx = 1, by = 256, elements_per_thread = 4) (%V: !kas.vector<3>) -> (%S: !kas.vector<3>) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    fuse.barrier
    %w = fuse.call @vadd3[elem](%v, %v) into shared[768] : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    fuse.store %w to %S reduce sum : !kas.vector<3>
  }
}
// CHECK:      %w = fuse.call @vadd3[elem](%v, %v) into shared[768]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %w to %S reduce sum : !kas.vector<3>
