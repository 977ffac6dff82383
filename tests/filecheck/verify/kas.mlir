// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Malformed kas IR is rejected by the op verifiers with a message, not a crash.

builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {
    %B = kas.call @mmul3(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %B : !kas.matrix<3x3>
  }
}
// CHECK: unknown op 'mmul3'; did you mean mmul33

// -----
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (B : !kas.matrix<3x3>) {
    %B = kas.call @mmul33(%A, %v) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.matrix<3x3>
    kas.return %B : !kas.matrix<3x3>
  }
}
// CHECK: operand 1 of 'mmul33' must be !kas.matrix<3x3>, got !kas.vector<3>

// -----
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {
    %B = kas.loop 2 iter_args(%X = %A) -> (!kas.matrix<3x3>) {
      %Y = kas.call @mtrans33(%X) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
      kas.yield %Y, %Y : !kas.matrix<3x3>, !kas.matrix<3x3>
    }
    kas.return %B : !kas.matrix<3x3>
  }
}
// CHECK: kas.yield yields 2 values but kas.loop has 1 results

// -----
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>, C : !kas.matrix<3x3>) {
    kas.return %A : !kas.matrix<3x3>
  }
}
// CHECK: kas.return returns 1 values but kas.program names 2 outputs

// -----
builtin.module {
  kas.program @p(%A: !kas.tensor<3x3>) -> (B : !kas.tensor<3x3>) {
    kas.return %A : !kas.tensor<3x3>
  }
}
// CHECK: kas.tensor must have 3 or 4 dimensions, got 2
