// RUN: irfuse-opt %s -t cuda | filecheck %s
// A reshape of a 64-word vector into a 4x4x4 tensor, one thread a row (4 threads an element) and
// one a line (16 threads): its definition selects each entry by deltas of the result's indices,
// and each selection over every value of the thread's coordinate is folded into the offset it
// picks, so every thread copies its words at offsets affine in tx, with no runtime test.
// The way back, a 4x4x4 tensor into its 64-word vector (an element's values before a scatter),
// one thread a line too: thread tx takes the vector's words k * 16 + tx, those of the tensor's
// line tx, so a kernel of lines keeps 16 threads an element to its end.
builtin.module {
  fuse.kernel @rows block(bx = 4, by = 8) (%V: !kas.vector<64>) -> (%T: !kas.tensor<4x4x4>) {
    %v = fuse.load %V into shared[0] : !kas.vector<64>
    fuse.barrier
    %t = fuse.call @reshape_4x4x4_64[row](%v) into shared[512] : (!kas.vector<64>) -> !kas.tensor<4x4x4>
    fuse.barrier
    fuse.store %t to %T : !kas.tensor<4x4x4>
  }
  fuse.kernel @lines block(bx = 16, by = 8) (%V: !kas.vector<64>) -> (%T: !kas.tensor<4x4x4>) {
    %v = fuse.load %V into shared[0] : !kas.vector<64>
    fuse.barrier
    %t = fuse.call @reshape_4x4x4_64[line](%v) into shared[512] : (!kas.vector<64>) -> !kas.tensor<4x4x4>
    fuse.barrier
    fuse.store %t to %T : !kas.tensor<4x4x4>
  }
  fuse.kernel @vector_lines block(bx = 16, by = 8) (%T: !kas.tensor<4x4x4>) -> (%V: !kas.vector<64>) {
    %t = fuse.load %T into shared[0] : !kas.tensor<4x4x4>
    fuse.barrier
    %v = fuse.call @reshape_64_4x4x4[line](%t) into shared[512] : (!kas.tensor<4x4x4>) -> !kas.vector<64>
    fuse.barrier
    fuse.store %v to %V : !kas.vector<64>
  }
}
// CHECK:      [row: one thread per output row; variant ss]
// CHECK-NOT:  ==
// CHECK:      const real_t r0 = A[ty*64 + tx*16];
// CHECK-NEXT: const real_t r1 = A[ty*64 + tx*16 + 1];
// CHECK:      const real_t r15 = A[ty*64 + tx*16 + 15];
// CHECK-NEXT: irf_result[ty*64 + tx*16] = r0;
// CHECK:      [line: one thread per line along the first index; variant ss]
// CHECK-NOT:  ==
// CHECK:      const real_t r0 = A[ty*64 + (tx/4)*4 + (tx%4)];
// CHECK-NEXT: const real_t r1 = A[ty*64 + (tx/4)*4 + (tx%4) + 16];
// CHECK:      const real_t r3 = A[ty*64 + (tx/4)*4 + (tx%4) + 48];
// CHECK:      [line: one thread per line along the first index; variant ss]
// CHECK-NOT:  ==
// CHECK:      const real_t r0 = A[ty*64 + tx];
// CHECK-NEXT: const real_t r1 = A[ty*64 + tx + 16];
// CHECK:      const real_t r3 = A[ty*64 + tx + 48];
// CHECK-NEXT: irf_result[ty*64 + tx] = r0;
// CHECK-NEXT: irf_result[ty*64 + tx + 16] = r1;
// CHECK:      __launch_bounds__(32{{.*}}) rows(
// CHECK:      if (active) irf_reshape_4x4x4_64_row_ss(tx, ty, smem + 0, smem + 512);
// CHECK:      __launch_bounds__(128{{.*}}) lines(
// CHECK:      if (active) irf_reshape_4x4x4_64_line_ss(tx, ty, smem + 0, smem + 512);
// CHECK:      __launch_bounds__(128{{.*}}) vector_lines(
// CHECK:      if (active) irf_reshape_64_4x4x4_line_ss(tx, ty, smem + 0, smem + 512);
