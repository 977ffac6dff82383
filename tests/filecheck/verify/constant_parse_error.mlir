// A literal is a scalar, and a reduction's kind is one of sum, max, min: anything else does not parse.
// RUN: sed -n '/^\/\/ TYPE$/,/^}/p' %s | not irfuse-opt 2>&1 | filecheck %s --check-prefix=TYPE
// RUN: sed -n '/^\/\/ KIND$/,/^}/p' %s | not irfuse-opt 2>&1 | filecheck %s --check-prefix=KIND

// TYPE
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.vector<3>) {
    %c = kas.constant 2.0 : !kas.vector<3>
    kas.return %c : !kas.vector<3>
  }
}
// TYPE: kas.constant is a !kas.scalar, not !kas.vector<3>

// KIND
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %t = kas.reduce mean %A : !kas.scalar -> !kas.scalar
    kas.return %t : !kas.scalar
  }
}
// KIND: Expected `sum`, `max`, or `min`.
