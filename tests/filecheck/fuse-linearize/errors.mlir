// RUN: not irfuse-opt %s --split-input-file -p fuse-linearize 2>&1 | filecheck %s
// A kernel the pass cannot take is refused before it runs, at the op's line and column in
// this file: a call of an implementation its op does not have, a call needing more threads
// an element than the kernel gives it. Each chunk fails on its own; the status says one did.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @madd33[rows](%a, %a) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: errors.mlir:9:5: error: op 'madd33' has no implementation 'rows' (it has: elem, row, entry)
// CHECK-NEXT: %b = fuse.call @madd33[rows](%a, %a)
// CHECK-NEXT: ^

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: errors.mlir:23:5: error: implementation 'row' of 'mtrans33' runs with 3 threads per element, but its kernel has bx = 1
// CHECK-NOT: Traceback
