// RUN: irfuse-opt %s --split-input-file -p fuse-place-barriers | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p fuse-allocate-shared | filecheck %s --check-prefix=ALLOC
// A stored value made by a call that only moves words (`mtrans33`: each entry of its result
// an entry of its operand) from a register value is built in place (analysis.placements):
// the call making the part writes its words into the staging, and the moving call touches
// nothing. So the race with the block's store of %x, over the same words, stands before the
// part's call, and none is left before the transpose; the store of %t waits for the part's
// writes.
builtin.module {
  fuse.kernel @part_written block(bx = 1, by = 32) (%A: !kas.matrix<3x3>, %X: !kas.matrix<3x3>) -> (%T: !kas.matrix<3x3>, %Y: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %x = fuse.load %X into shared[0] : !kas.matrix<3x3>
    fuse.store %x to %Y : !kas.matrix<3x3>
    %p = fuse.call @mmul33[elem](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @mtrans33[elem](%p) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %t to %T : !kas.matrix<3x3>
  }
}
// CHECK-LABEL: fuse.kernel @part_written
// CHECK:      %x = fuse.load %X into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %x to %Y
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %p = fuse.call @mmul33[elem](%a, %a) into reg
// CHECK-NEXT: %t = fuse.call @mtrans33[elem](%p) into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %t to %T

// -----

// Its words are live from the part's call on: a value read by that call (%b, staged) keeps
// words of its own beside it, where the transpose alone would have reused them.
builtin.module {
  fuse.kernel @live_from_part block(bx = 1, by = 32) (%B: !kas.matrix<3x3>) -> (%T: !kas.matrix<3x3>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %p = fuse.call @mmul33[elem](%b, %b) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @mtrans33[elem](%p) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %t to %T : !kas.matrix<3x3>
  }
}
// ALLOC-LABEL: fuse.kernel @live_from_part
// ALLOC:       %b = fuse.load %B into shared[0]
// ALLOC:       %t = fuse.call @mtrans33[elem](%p) into shared[288]

// -----

// Read by a call (not only stored), the transpose is made where it is: no part is written
// ahead, and the barriers are those of any call.
builtin.module {
  fuse.kernel @read_by_call block(bx = 1, by = 32) (%A: !kas.matrix<3x3>, %X: !kas.matrix<3x3>) -> (%T: !kas.matrix<3x3>, %Y: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %x = fuse.load %X into shared[0] : !kas.matrix<3x3>
    fuse.store %x to %Y : !kas.matrix<3x3>
    %p = fuse.call @mmul33[elem](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @mtrans33[elem](%p) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %u = fuse.call @mmul33[elem](%t, %t) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %t to %T : !kas.matrix<3x3>
  }
}
// CHECK-LABEL: fuse.kernel @read_by_call
// CHECK:      fuse.store %x to %Y
// CHECK-NEXT: %p = fuse.call @mmul33[elem](%a, %a) into reg
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %t = fuse.call @mtrans33[elem](%p) into shared[0]
