// RUN: irfuse-opt %examples/bigfusion_bench.kas | filecheck %s
// RUN: irfuse-opt %examples/bigfusion_bench.kas | irfuse-opt | filecheck %s
// Printed kas IR of examples/bigfusion_bench.kas; it parses back to the same text.

// CHECK:      builtin.module {
// CHECK-NEXT:   kas.program @bigfusion_bench(%A: !kas.matrix<3x3>, %B: !kas.matrix<3x3>, %c: !kas.vector<3>, %D: !kas.matrix<5x5>, %E: !kas.matrix<5x5>) -> (F : !kas.matrix<5x5>) {
// CHECK-NEXT:     %M1 = kas.call @mmul33(%A, %B) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     %v1 = kas.call @mvmul33(%M1, %c) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
// CHECK-NEXT:     %s1 = kas.call @venorm3(%v1) : (!kas.vector<3>) -> !kas.scalar
// CHECK-NEXT:     %M2 = kas.call @mmul55(%D, %E) : (!kas.matrix<5x5>, !kas.matrix<5x5>) -> !kas.matrix<5x5>
// CHECK-NEXT:     %F = kas.call @smmul55(%M2, %s1) : (!kas.matrix<5x5>, !kas.scalar) -> !kas.matrix<5x5>
// CHECK-NEXT:     kas.return %F : !kas.matrix<5x5>
// CHECK-NEXT:   }
// CHECK-NEXT: }
