// RUN: not irfuse-opt %s -p fuse-load-by-readers 2>&1 | filecheck %s
// RUN: not irfuse-opt %s -p "fuse-load-by-readers{every=true}" 2>&1 | filecheck %s
// A marked kernel the pass cannot take (a call needing more threads an element than the
// kernel gives it) is refused at the op's line and column before anything moves.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  } {loads_by_readers}
}
// CHECK: errors.mlir:9:5: error: implementation 'row' of 'mtrans33' runs with 3 threads per element, but its kernel has bx = 1
// CHECK-NOT: Traceback
