// RUN: irfuse-opt %s -p fuse-allocate-shared | filecheck %s
// Values whose lifetimes overlap get disjoint words; a value whose lifetime starts after
// another's ends reuses its words; offsets are 16-byte aligned (multiples of 4 words);
// register values take none. by = 3: a vector3 takes 9 words, a scalar 3.
// Lifetimes (op positions): v [0,2] t [1,2] w [2,3] x [3,4] s [5,6]; largest first:
// v -> 0; w overlaps v -> 12; x overlaps w only -> 0; t overlaps v and w -> 24; s -> 0.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 3) (%V: !kas.vector<3>, %T: !kas.scalar) -> (%S: !kas.scalar) {
    %v = fuse.load %V into shared[100] : !kas.vector<3>
    %t = fuse.load %T into shared[200] : !kas.scalar
    fuse.barrier
    %w = fuse.call @svmul3[elem](%v, %t) into shared[300] : (!kas.vector<3>, !kas.scalar) -> !kas.vector<3>
    fuse.barrier
    %x = fuse.call @vadd3[elem](%w, %w) into shared[400] : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    %r = fuse.call @vadd3[elem](%x, %x) into reg : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    %s = fuse.call @venorm3[elem](%r) into shared[500] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %S : !kas.scalar
  }
}
// CHECK:      %v = fuse.load %V into shared[0]
// CHECK-NEXT: %t = fuse.load %T into shared[24]
// CHECK:      %w = fuse.call @svmul3[elem](%v, %t) into shared[12]
// CHECK:      %x = fuse.call @vadd3[elem](%w, %w) into shared[0]
// CHECK-NEXT: %r = fuse.call @vadd3[elem](%x, %x) into reg
// CHECK:      %s = fuse.call @venorm3[elem](%r) into shared[0]
