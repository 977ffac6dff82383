// RUN: irfuse-opt %s -p fuse-load-by-readers | filecheck %s
// RUN: irfuse-opt %s -p fuse-load-by-readers,fuse-allocate-shared,fuse-place-barriers -t cuda | filecheck %s --check-prefix=CUDA
// RUN: irfuse-opt %s -p "fuse-load-by-readers{every=true}" | filecheck %s --check-prefix=EVERY
// A kernel marked `loads_by_readers` (the driver marks those whose shared memory bounds their
// blocks): its loaded values that the threads of an element read by lines (u, a column of 4
// words a thread; g, a line of 5) leave shared memory, each loaded by its reader's threads right
// before that reader. b, whose 20 words every thread of the element reads, stays copied: loaded
// by each of 16 threads it would cost the L1 more than the block's copy. The unmarked kernel is
// left as it was, unless `every` takes every kernel as marked.
builtin.module {
  fuse.kernel @marked block(bx = 16, by = 8) (%B: !kas.matrix<5x4>, %U: !kas.tensor<4x4x4>, %G: !kas.tensor<5x4x4>) -> (%Y: !kas.tensor<5x4x4>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<5x4>
    %u = fuse.load %U into shared[160] : !kas.tensor<4x4x4>
    %g = fuse.load %G into shared[672] : !kas.tensor<5x4x4>
    fuse.barrier
    %z = fuse.call @contract_kc_cba_kba_5x4_4x4x4[line](%b, %u) into shared[1312] : (!kas.matrix<5x4>, !kas.tensor<4x4x4>) -> !kas.tensor<5x4x4>
    %y = fuse.call @add_5x4x4_5x4x4[line](%z, %g) into shared[1952] : (!kas.tensor<5x4x4>, !kas.tensor<5x4x4>) -> !kas.tensor<5x4x4>
    fuse.barrier
    fuse.store %y to %Y : !kas.tensor<5x4x4>
  } {loads_by_readers}
  fuse.kernel @plain block(bx = 16, by = 8) (%B: !kas.matrix<5x4>, %U: !kas.tensor<4x4x4>, %G: !kas.tensor<5x4x4>) -> (%Y: !kas.tensor<5x4x4>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<5x4>
    %u = fuse.load %U into shared[160] : !kas.tensor<4x4x4>
    %g = fuse.load %G into shared[672] : !kas.tensor<5x4x4>
    fuse.barrier
    %z = fuse.call @contract_kc_cba_kba_5x4_4x4x4[line](%b, %u) into shared[1312] : (!kas.matrix<5x4>, !kas.tensor<4x4x4>) -> !kas.tensor<5x4x4>
    %y = fuse.call @add_5x4x4_5x4x4[line](%z, %g) into shared[1952] : (!kas.tensor<5x4x4>, !kas.tensor<5x4x4>) -> !kas.tensor<5x4x4>
    fuse.barrier
    fuse.store %y to %Y : !kas.tensor<5x4x4>
  }
}
// CHECK-LABEL: fuse.kernel @marked
// CHECK:      %b = fuse.load %B into shared[0]
// CHECK-NEXT: %u = fuse.load %U into reg
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %z = fuse.call @contract_kc_cba_kba_5x4_4x4x4[line](%b, %u)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %g = fuse.load %G into reg
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %y = fuse.call @add_5x4x4_5x4x4[line](%z, %g)
// CHECK:      } {loads_by_readers}
// CHECK-LABEL: fuse.kernel @plain
// CHECK:      %b = fuse.load %B into shared[0]
// CHECK-NEXT: %u = fuse.load %U into shared[160]
// CHECK-NEXT: %g = fuse.load %G into shared[672]

// Each thread loads the words of its line from global memory (u: its column's 4 words at
// stride 16; g: its line's 5), g right before the call reading it.
// CUDA-LABEL: marked(
// CUDA:       v_u[0] = g_U[first * 64 + (ty*64 + (tx%4) + (tx/4)*4) + 0]; v_u[16] = g_U[first * 64 + (ty*64 + (tx%4) + (tx/4)*4) + 16];
// CUDA:       irf_contract_kc_cba_kba_5x4_4x4x4_line_
// CUDA:       v_g[0] = g_G[first * 80 + (ty*80 + (tx/4)*4 + (tx%4)) + 0];
// CUDA-SAME:  v_g[64] = g_G[first * 80 + (ty*80 + (tx/4)*4 + (tx%4)) + 64];
// CUDA:       irf_add_5x4x4_5x4x4_line_

// EVERY-LABEL: fuse.kernel @marked
// EVERY:       %g = fuse.load %G into reg
// EVERY-LABEL: fuse.kernel @plain
// EVERY:       %u = fuse.load %U into reg
// EVERY:       %g = fuse.load %G into reg
