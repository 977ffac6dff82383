// RUN: irfuse-opt %s -p kas-dce | filecheck %s
// A dead chain disappears whole; live calls and their order stay; a program
// with nothing dead is unchanged.

builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (s : !kas.scalar) {
    %B = kas.call @mmul33(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %dead1 = kas.call @mtrans33(%B) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %dead2 = kas.call @madd33(%dead1, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %w = kas.call @mvmul33(%B, %v) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    %s = kas.call @venorm3(%w) : (!kas.vector<3>) -> !kas.scalar
    kas.return %s : !kas.scalar
  }
}
// CHECK:      kas.program @p
// CHECK-NEXT:   %B = kas.call @mmul33(%A, %A)
// CHECK-NEXT:   %w = kas.call @mvmul33(%B, %v)
// CHECK-NEXT:   %s = kas.call @venorm3(%w)
// CHECK-NEXT:   kas.return %s : !kas.scalar
// CHECK-NOT:  dead
