// RUN: irfuse-opt %s -p 'kas-jvp{wrt=e}' | filecheck %s
// A table (a uniform input fixed when compiling, `constants=`) is a literal: copied into the
// derivative as it is, with no tangent; the call reading it takes the other operand's.
builtin.module {
  kas.program @tabled(%e: !kas.matrix<3x3>) -> (s : !kas.matrix<3x3>) {
    %M = kas.table [1.0, 0.5, 0.0, 0.0, 2.0, 0.1, 0.0, 0.0, 3.0] : !kas.matrix<3x3>
    %s = kas.call @mmul33(%e, %M) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %s : !kas.matrix<3x3>
  }
}
// CHECK:      kas.program @tabled_jvp(%e: !kas.matrix<3x3>, %de: !kas.matrix<3x3>) -> (s : !kas.matrix<3x3>, ds : !kas.matrix<3x3>) {
// CHECK-NEXT:   %M = kas.table [1.0, 0.5, 0.0, 0.0, 2.0, 0.1, 0.0, 0.0, 3.0] : !kas.matrix<3x3>
// CHECK-NEXT:   %s = kas.call @mmul33(%e, %M)
// CHECK-NEXT:   %ds = kas.call @jvp_10__mmul33(%M, %de)
// CHECK-NOT:    %dM
