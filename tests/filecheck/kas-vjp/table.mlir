// RUN: irfuse-opt %s -p 'kas-vjp{wrt=e}' | filecheck %s
// A table (a uniform input fixed when compiling, `constants=`) is a literal, uniform: copied
// into the derivative as it is, no adjoint made for it; the call reading it gives the other
// operand its share.
builtin.module {
  kas.program @tabled(%e: !kas.matrix<3x3>) -> (s : !kas.matrix<3x3>) {
    %M = kas.table [1.0, 0.5, 0.0, 0.0, 2.0, 0.1, 0.0, 0.0, 3.0] : !kas.matrix<3x3>
    %s = kas.call @mmul33(%e, %M) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %s : !kas.matrix<3x3>
  }
}
// CHECK:      kas.program @tabled_vjp(%e: !kas.matrix<3x3>, %bar_s: !kas.matrix<3x3>) -> (s : !kas.matrix<3x3>, bar_e : !kas.matrix<3x3>) {
// CHECK-NEXT:   %M = kas.table [1.0, 0.5, 0.0, 0.0, 2.0, 0.1, 0.0, 0.0, 3.0] : !kas.matrix<3x3>
// CHECK-NEXT:   %s = kas.call @mmul33(%e, %M)
// CHECK-NEXT:   %bar_e = kas.call @vjp_0__mmul33(%M, %bar_s)
// CHECK-NOT:    bar_M
