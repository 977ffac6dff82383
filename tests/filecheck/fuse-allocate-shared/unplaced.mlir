// RUN: not irfuse-opt %s --split-input-file -p fuse-allocate-shared 2>&1 | filecheck %s
// RUN: irfuse-opt %s --split-input-file | filecheck %s --check-prefix=READ
// RUN: sed 's/ unplaced / /' %s | not irfuse-opt --split-input-file 2>&1 | filecheck %s --check-prefix=UNMARKED
// A kernel marked `unplaced` holds fuse-partition's places, each value at offsets of its own:
// they may pass a block's shared memory (here the product at word 60000 of 64 elements ends
// past 227 KB); fuse-allocate-shared overlaps them and removes the mark, and the capacity
// applies from then on. Without the mark the same places are refused.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) unplaced (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[elem](%a, %a) into shared[60000] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// READ:       fuse.kernel @k block(bx = 1, by = 64) unplaced (%A: !kas.matrix<2x2>)
// CHECK:      fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<2x2>)
// CHECK:      %c = fuse.call @mmul22[elem](%a, %a) into shared[{{[0-9]}}{{[0-9]?[0-9]?[0-9]?}}, pitch 5]
// UNMARKED:   shared[60000] for 64 elements of 4 words ends at word 60256 (241024 bytes): a block has at most 232448 bytes of shared memory

// -----
// A value that alone needs more than a block has (1000 words of 64 elements: 256000 bytes)
// cannot be placed: fuse-allocate-shared says so.
builtin.module {
  fuse.kernel @big block(bx = 1, by = 64) unplaced (%A: !kas.tensor<10x10x10>) -> (%C: !kas.tensor<10x10x10>) {
    %a = fuse.load %A into shared[0] : !kas.tensor<10x10x10>
    fuse.barrier
    fuse.store %a to %C : !kas.tensor<10x10x10>
  }
}
// CHECK: error: fuse-allocate-shared: @big needs 256000 bytes of shared memory for its 64 elements a block once its values are overlapped; a block has at most 232448: give it fewer elements a block
