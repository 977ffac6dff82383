// RUN: irfuse-opt %s -p test-print-bank-wavefronts 2>&1 >/dev/null | filecheck %s
// RUN: irfuse-opt %s -p fuse-allocate-shared,test-print-bank-wavefronts 2>&1 >/dev/null | filecheck %s --check-prefix=PADDED
// RUN: sed 's/^builtin.module {/builtin.module attributes {kas.element_type = i32} {/' %s | not irfuse-opt -p test-print-bank-wavefronts 2>&1 | filecheck %s --check-prefix=BAD
// BAD: error: module attribute kas.element_type must be f32 or f64, got i32
// Element mapping of a 2x2 product, 32 elements per block, float32, counted by hand:
// - each call instruction has the 32 threads of a warp read word ty*4 + k: 8 banks, 4 words
//   each, 4 wavefronts; %a is read through both operands, 4 instructions each: 32; its load
//   copies 32*4 words = 512 bytes, 4 wavefronts of 128 bytes: 36 in all;
// - %c: 4 write instructions of 4 wavefronts, and the store's copy of 4: 20.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[elem](%a, %a) into shared[128] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK:      wavefronts in @k: 56 per block
// CHECK-NEXT:   %a shared[0]: 36
// CHECK-NEXT:   %c shared[128]: 20
// With pitch 5 every call instruction is one wavefront (8 reads of %a, 4 writes of %c); a
// padded value is copied element-wise: 4 rounds of 32 threads, each round's 32 words spread
// over 40 (32 banks + 8), 2 wavefronts a round: 8 per copy. %a 8 + 8, %c 4 + 8.
// PADDED:      wavefronts in @k: 28 per block
// PADDED-NEXT:   %a shared[0, pitch 5]: 16
// PADDED-NEXT:   %c shared[160, pitch 5]: 12
