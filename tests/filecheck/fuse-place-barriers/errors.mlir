// RUN: not irfuse-opt %s --split-input-file -p fuse-place-barriers 2>&1 | filecheck %s
// A kernel the pass cannot take is refused before it runs, at the op's line and column in
// this file: a value placed past a block's shared memory (the pass reads each access's words),
// and a load of what is not one of the kernel's inputs.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<2x2>
    %c = fuse.call @mmul22[elem](%a, %a) into shared[60000] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK: errors.mlir:8:5: error: shared[60000] for 64 elements of 4 words ends at word 60256 (241024 bytes): a block has at most 232448 bytes of shared memory
// CHECK-NEXT: %c = fuse.call @mmul22[elem](%a, %a) into shared[60000]
// CHECK-NEXT: ^

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %C into shared[0] : !kas.matrix<2x2>
    fuse.store %a to %C : !kas.matrix<2x2>
  }
}
// CHECK: errors.mlir:19:5: error: fuse.load must read a kernel input argument
// CHECK-NOT: Traceback
