// RUN: irfuse-opt %s -p 'fuse-promote-registers{inputs=true}' | filecheck %s
// A value loaded from a uniform input stays in the uniform place (the block's one copy,
// read by every element) whatever the options: only per-element values move to registers.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) uniform(1) (%V: !kas.vector<3>, %C: !kas.vector<3>) -> (%W: !kas.vector<3>, %T: !kas.vector<3>, %S: !kas.scalar) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    %c = fuse.load %C into uniform : !kas.vector<3>
    fuse.barrier
    %w = fuse.call @vadd3[elem](%v, %c) into shared[12] : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    %s = fuse.call @vdot3[elem](%v, %v) into shared[24] : (!kas.vector<3>, !kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %w to %W : !kas.vector<3>
    fuse.store %w to %T reduce sum : !kas.vector<3>
    fuse.store %s to %S reduce max : !kas.scalar
  }
}
// CHECK:      %v = fuse.load %V into reg : !kas.vector<3>
// CHECK-NEXT: %c = fuse.load %C into uniform : !kas.vector<3>
