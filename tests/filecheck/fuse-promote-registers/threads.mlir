// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// Producer and consumer must use the same threads: a row-mapped result read by an
// elem-mapped (one thread per element) call stays in shared memory.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (%R: !kas.vector<3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %w = fuse.load %v into shared[72] : !kas.vector<3>
    fuse.barrier
    %m = fuse.call @mtrans33[row](%a) into shared[96] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %r = fuse.call @mvmul33[elem](%m, %w) into shared[168] : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    fuse.store %r to %R : !kas.vector<3>
  }
}
// CHECK: %m = fuse.call @mtrans33[row](%a) into shared[96]
