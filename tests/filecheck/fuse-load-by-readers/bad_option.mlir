// RUN: not irfuse-opt %s -p "fuse-load-by-readers{every=maybe}" 2>&1 | filecheck %s
// An option that is not a truth value is refused by name.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @madd33[elem](%a, %a) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse-load-by-readers: every must be true or false, got 'maybe'
// CHECK-NOT: Traceback
