// RUN: irfuse-opt %examples/synctest.kas | filecheck %s
// RUN: irfuse-opt %examples/synctest.kas | irfuse-opt | filecheck %s
// Printed kas IR of examples/synctest.kas; it parses back to the same text.

// CHECK:      builtin.module {
// CHECK-NEXT:   kas.program @synctest(%A: !kas.matrix<3x3>) -> (F : !kas.matrix<3x3>) {
// CHECK-NEXT:     %M_1_ = kas.call @madd33(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     %M_2_ = kas.call @madd33(%A, %M_1_) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     %M_3_ = kas.call @madd33(%A, %M_2_) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     %F = kas.call @madd33(%A, %M_3_) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     kas.return %F : !kas.matrix<3x3>
// CHECK-NEXT:   }
// CHECK-NEXT: }
