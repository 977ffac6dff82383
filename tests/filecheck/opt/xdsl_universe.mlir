// RUN: xdsl-opt %s -p kas-dce | filecheck %s
// RUN: xdsl-opt %s -p fuse-each -t cuda | filecheck %s --check-prefix=CUDA
// Stock xdsl-opt sees irfuse's dialects, passes and the cuda target through the xdsl.universe entry point.
builtin.module {
  kas.program @p(%A: !kas.matrix<2x2>) -> (B : !kas.matrix<2x2>) {
    %dead = kas.call @mtrans22(%A) : (!kas.matrix<2x2>) -> !kas.matrix<2x2>
    %B = kas.call @mmul22(%A, %A) : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    kas.return %B : !kas.matrix<2x2>
  }
}
// CHECK:      kas.program @p(%A: !kas.matrix<2x2>) -> (B : !kas.matrix<2x2>) {
// CHECK-NEXT:   %B = kas.call @mmul22(%A, %A)
// CUDA: extern "C" __global__ void __launch_bounds__(128, 16) p_k1_mmul22(
