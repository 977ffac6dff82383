// RUN: irfuse-opt %examples/stvenant.kas | filecheck %s
// RUN: irfuse-opt %examples/stvenant.kas | irfuse-opt | filecheck %s
// Printed kas IR of examples/stvenant.kas; it parses back to the same text.

// CHECK:      builtin.module {
// CHECK-NEXT:   kas.program @stvenant(%ten4help1: !kas.tensor<3x3x3x3>, %mat33helpf: !kas.matrix<3x3>, %vec3dphi: !kas.vector<3>, %mat33help1: !kas.matrix<3x3>, %vecquadweightssums: !kas.scalar) -> (ten3help2 : !kas.tensor<3x3x3>, vec3nodestiff : !kas.vector<3>) {
// CHECK-NEXT:     %vec3nodestiff = kas.call @mvmul33(%mat33help1, %vec3dphi) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
// CHECK-NEXT:     %vec3nodestiff_1 = kas.call @svmul3(%vec3nodestiff, %vecquadweightssums) : (!kas.vector<3>, !kas.scalar) -> !kas.vector<3>
// CHECK-NEXT:     %ten3help1 = kas.call @ttmul411(%ten4help1, %vec3nodestiff_1) : (!kas.tensor<3x3x3x3>, !kas.vector<3>) -> !kas.tensor<3x3x3>
// CHECK-NEXT:     %ten3help2 = kas.call @ttmul3212(%ten3help1, %mat33helpf) : (!kas.tensor<3x3x3>, !kas.matrix<3x3>) -> !kas.tensor<3x3x3>
// CHECK-NEXT:     kas.return %ten3help2, %vec3nodestiff_1 : !kas.tensor<3x3x3>, !kas.vector<3>
// CHECK-NEXT:   }
// CHECK-NEXT: }
