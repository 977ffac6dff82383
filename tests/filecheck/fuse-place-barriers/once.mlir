// RUN: irfuse-opt %s --split-input-file -p fuse-place-barriers | filecheck %s
// A kernel run once has one thread per block, which races with nobody: no barrier at all.
// A reduction's partials are a store of the block's elements (any thread reads any element's
// words): a barrier stands between the call that makes the value and that store.
builtin.module {
  fuse.kernel @once block(bx = 1, by = 1) once (%M: !kas.scalar) -> (%R: !kas.scalar) {
    %m = fuse.load %M into shared[0] : !kas.scalar
    fuse.barrier
    %r = fuse.call @srcp[elem](%m) into shared[4] : (!kas.scalar) -> !kas.scalar
    fuse.barrier
    fuse.store %r to %R : !kas.scalar
  }
}
// CHECK:      %m = fuse.load %M into shared[0] : !kas.scalar
// CHECK-NEXT: %r = fuse.call @srcp[elem](%m)
// CHECK-NEXT: fuse.store %r to %R : !kas.scalar
// CHECK-NEXT: } {barriers_before = #builtin.int<2>}

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%V: !kas.vector<3>) -> (%S: !kas.scalar) {
    %v = fuse.load %V into reg : !kas.vector<3>
    %s = fuse.call @vdot3[elem](%v, %v) into shared[0] : (!kas.vector<3>, !kas.vector<3>) -> !kas.scalar
    fuse.store %s to %S reduce sum : !kas.scalar
  }
}
// CHECK:      %s = fuse.call @vdot3[elem](%v, %v) into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %s to %S reduce sum : !kas.scalar
