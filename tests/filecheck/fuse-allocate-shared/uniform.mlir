// RUN: irfuse-opt %s -p 'fuse-allocate-shared{pad-banks=false}' | filecheck %s
// The uniform place takes no words of the planned buffer: the shared values pack from word 0
// around it, and the uniform value keeps its place.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) uniform(1) (%V: !kas.vector<3>, %C: !kas.vector<3>) -> (%W: !kas.vector<3>, %T: !kas.vector<3>, %S: !kas.scalar) {
    %v = fuse.load %V into shared[100] : !kas.vector<3>
    %c = fuse.load %C into uniform : !kas.vector<3>
    fuse.barrier
    %w = fuse.call @vadd3[elem](%v, %c) into shared[200] : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    %s = fuse.call @vdot3[elem](%v, %v) into shared[300] : (!kas.vector<3>, !kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %w to %W : !kas.vector<3>
    fuse.store %w to %T reduce sum : !kas.vector<3>
    fuse.store %s to %S reduce max : !kas.scalar
  }
}
// CHECK:      %v = fuse.load %V into shared[{{[0-9]+}}] : !kas.vector<3>
// CHECK-NEXT: %c = fuse.load %C into uniform : !kas.vector<3>
// CHECK:      %w = fuse.call @vadd3[elem](%v, %c) into shared[{{[0-9]+}}]
// CHECK:      %s = fuse.call @vdot3[elem](%v, %v) into shared[{{[0-9]+}}]
// CHECK-NOT:  shared[{{[0-9][0-9][0-9]}}]
