// RUN: irfuse-opt %s -p fuse-verify-races | filecheck %s
// Calls that only touch their own thread's words need no barrier between them.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %y = fuse.call @madd33[elem](%a, %a) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %z = fuse.call @mtrans33[elem](%y) into shared[72] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @k
// CHECK: %z = fuse.call @mtrans33[elem](%y) into shared[72]
