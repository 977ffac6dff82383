// RUN: irfuse-opt %s -p fuse-place-barriers | filecheck %s
// A loop whose body reads its carried matrix from every thread of the element (mmul33[row]
// reads all of %m as its second operand) and copies the new value in by rows: a barrier
// before the copy (other threads may still read the rows it overwrites) and one at the
// start of the body (the next iteration reads what this one's copy wrote: the back edge;
// on the first iteration it also covers the copy in). None is needed before the loop.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %m0 = fuse.copy %a into shared[36] : !kas.matrix<3x3>
    %r = fuse.loop 3 iter_args(%m = %m0) -> (!kas.matrix<3x3> into shared[36]) {
      %t = fuse.call @mmul33[row](%m, %m) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      %n = fuse.copy %t into shared[36] : !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    %z = fuse.copy %r into shared[108] : !kas.matrix<3x3>
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %m0 = fuse.copy %a into shared[36]
// CHECK-NEXT: %r = fuse.loop 3 iter_args(%m = %m0) -> (!kas.matrix<3x3> into shared[36]) {
// CHECK-NEXT:   fuse.barrier
// CHECK-NEXT:   %t = fuse.call @mmul33[row](%m, %m)
// CHECK-NEXT:   fuse.barrier
// CHECK-NEXT:   %n = fuse.copy %t into shared[36]
// CHECK-NEXT:   fuse.yield %n
// CHECK-NEXT: }
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %z = fuse.copy %r into shared[108]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %z to %Z
