// RUN: irfuse-opt %s -p fuse-place-barriers | filecheck %s
// With padded values (pitch 5), each elem call still touches only its own thread's element
// (words 5*ty .. 5*ty+3), so the barrier between the two calls goes; the barriers after the
// block-wide load and before the block-wide store stay.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0, pitch 5] : !kas.matrix<2x2>
    fuse.barrier
    %b = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[elem](%b, %a) into shared[320, pitch 5] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK:      %a = fuse.load %A into shared[0, pitch 5]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %b = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5]
// CHECK-NEXT: %c = fuse.call @mmul22[elem](%b, %a) into shared[320, pitch 5]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %c to %C
