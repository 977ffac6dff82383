// RUN: not irfuse-opt %s --split-input-file -p fuse-remap-threads 2>&1 | filecheck %s
// A kernel the pass cannot take is refused before it runs, at the op's line and column in
// this file: a call needing more threads an element than the kernel's bx (the pass moves
// calls needing fewer onto the block's first threads, never more), and an op unknown to the
// op library.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mmul33[entry](%a, %a) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: errors.mlir:10:5: error: implementation 'entry' of 'mmul33' runs with 9 threads per element, but its kernel has bx = 3
// CHECK-NEXT: %b = fuse.call @mmul33[entry](%a, %a)
// CHECK-NEXT: ^

// -----
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mmul3[row](%a, %a) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: errors.mlir:24:5: error: unknown op 'mmul3'
// CHECK-NOT: Traceback
