// RUN: not irfuse-opt %s 2>&1 | filecheck %s
// Without --verify-diagnostics a verifier failure exits with status 1 and a message, no traceback.
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {
    %B = kas.call @mmul3(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %B : !kas.matrix<3x3>
  }
}
// The error names the op's line and column in the IR file, and shows the line.
// CHECK: exit_status.mlir:5:5: error: unknown op 'mmul3'; did you mean mmul33
// CHECK-NEXT: %B = kas.call @mmul3(%A, %A)
// CHECK-NEXT: ^
// CHECK-NOT: Traceback
