// RUN: irfuse-opt %s --split-input-file --verify-diagnostics -p fuse-verify-races 2>&1 | filecheck %s
// A reduction's partials read the value with any thread of the block: without a barrier after
// the call that makes it, a race. A kernel run once (one thread) has none.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%V: !kas.vector<3>) -> (%S: !kas.scalar) {
    %v = fuse.load %V into reg : !kas.vector<3>
    %s = fuse.call @vdot3[elem](%v, %v) into shared[0] : (!kas.vector<3>, !kas.vector<3>) -> !kas.scalar
    fuse.store %s to %S reduce sum : !kas.scalar
  }
}
// CHECK: error: race in fuse.kernel @k: op 1 (fuse.call @vdot3[elem] into %s) writes shared word 0 and op 2 (fuse.store of %s) touches it from another thread with no fuse.barrier between them

// -----
builtin.module {
  fuse.kernel @once block(bx = 1, by = 1) once (%M: !kas.scalar) -> (%R: !kas.scalar) {
    %m = fuse.load %M into shared[0] : !kas.scalar
    %r = fuse.call @srcp[elem](%m) into shared[4] : (!kas.scalar) -> !kas.scalar
    fuse.store %r to %R : !kas.scalar
  }
}
// CHECK: fuse.kernel @once block(bx = 1, by = 1) once
// CHECK-NOT: race
