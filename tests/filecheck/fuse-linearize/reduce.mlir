// RUN: irfuse-opt %s -p fuse-linearize | filecheck %s
// A value that is both stored and reduced has two stores: both follow its producer (the
// reduction's partials are a store of the block's elements), in the kernel's output order.
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
// CHECK:      %c = fuse.load %C into uniform : !kas.vector<3>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %w = fuse.call @vadd3[elem](%v, %c)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %w to %W : !kas.vector<3>
// CHECK-NEXT: fuse.store %w to %T reduce sum : !kas.vector<3>
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %s = fuse.call @vdot3[elem](%v, %v)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %s to %S reduce max : !kas.scalar
// CHECK-NEXT: }
