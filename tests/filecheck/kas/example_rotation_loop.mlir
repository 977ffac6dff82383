// RUN: irfuse-opt %examples/rotation_loop.kas | filecheck %s
// RUN: irfuse-opt %examples/rotation_loop.kas | irfuse-opt | filecheck %s
// Printed kas IR of examples/rotation_loop.kas; it parses back to the same text.

// CHECK:      builtin.module {
// CHECK-NEXT:   kas.program @rotation_loop(%R: !kas.matrix<3x3>, %Q: !kas.matrix<3x3>, %x: !kas.vector<3>) -> (R : !kas.matrix<3x3>, n : !kas.scalar) {
// CHECK-NEXT:     %R_1, %T, %v = kas.loop 4 iter_args(%R_2 = %R) -> (!kas.matrix<3x3>, !kas.matrix<3x3>, !kas.vector<3>) {
// CHECK-NEXT:       %T_1 = kas.call @mmul33(%R_2, %Q) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:       %R_3 = kas.call @madd33(%T_1, %Q) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:       %v_1 = kas.call @mvmul33(%R_3, %x) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
// CHECK-NEXT:       kas.yield %R_3, %T_1, %v_1 : !kas.matrix<3x3>, !kas.matrix<3x3>, !kas.vector<3>
// CHECK-NEXT:     }
// CHECK-NEXT:     %n = kas.call @venorm3(%v) : (!kas.vector<3>) -> !kas.scalar
// CHECK-NEXT:     kas.return %R_1, %n : !kas.matrix<3x3>, !kas.scalar
// CHECK-NEXT:   }
// CHECK-NEXT: }
