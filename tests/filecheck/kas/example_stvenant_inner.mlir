// RUN: irfuse-opt %examples/stvenant_inner.kas | filecheck %s
// RUN: irfuse-opt %examples/stvenant_inner.kas | irfuse-opt | filecheck %s
// Printed kas IR of examples/stvenant_inner.kas; it parses back to the same text.

// CHECK:      builtin.module {
// CHECK-NEXT:   kas.program @stvenant_inner(%ten3help2: !kas.tensor<3x3x3>, %vec3dpsi: !kas.vector<3>, %vec3dphi: !kas.vector<3>, %mat33stress: !kas.matrix<3x3>, %vecquadweightssums: !kas.scalar) -> (mattangenthelp : !kas.matrix<3x3>) {
// CHECK-NEXT:     %mat33help2 = kas.call @ttmul311(%ten3help2, %vec3dpsi) : (!kas.tensor<3x3x3>, !kas.vector<3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     %vec3help = kas.call @mvmul33(%mat33stress, %vec3dphi) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
// CHECK-NEXT:     %schelp = kas.call @vvmulabs3(%vec3help, %vec3dpsi) : (!kas.vector<3>, !kas.vector<3>) -> !kas.scalar
// CHECK-NEXT:     %mattangenthelp = kas.call @smimul33(%vecquadweightssums) : (!kas.scalar) -> !kas.matrix<3x3>
// CHECK-NEXT:     %mattangenthelp_1 = kas.call @smmul33(%mattangenthelp, %schelp) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
// CHECK-NEXT:     %mat33help2_1 = kas.call @smmul33(%mat33help2, %vecquadweightssums) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
// CHECK-NEXT:     %mattangenthelp_2 = kas.call @madd33(%mattangenthelp_1, %mat33help2_1) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
// CHECK-NEXT:     kas.return %mattangenthelp_2 : !kas.matrix<3x3>
// CHECK-NEXT:   }
// CHECK-NEXT: }
