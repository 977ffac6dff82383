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

// -----
// A loop run from the host records its body once per iteration: a trip count beyond the limit is refused.
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (t : !kas.matrix<3x3>) {
    %t = kas.loop 99999999999 iter_args(%a = %A) -> (!kas.matrix<3x3>) {
      %s = kas.call @madd33(%a, %a) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      kas.yield %s : !kas.matrix<3x3>
    }
    kas.return %t : !kas.matrix<3x3>
  }
}
// CHECK: kas.loop runs 99,999,999,999 iterations with its enclosing loops; at most 1,000,000 are allowed
