// RUN: not irfuse-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: not irfuse run %s 2>&1 | filecheck %s --check-prefix=COMPILE
// A type whose parameters its own verifier refuses (a matrix of no rows, a tensor with a zero
// extent) raises as it is parsed, wherever it is written: the error names its line and column,
// as a refused op's does, for irfuse-opt and for a compile of the file.
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.scalar) {
    %B = kas.call @trace_3x3(%A) : (!kas.matrix<0x3>) -> !kas.scalar
  }
}
// CHECK: type_parameters_refused.mlir:8:37: error: kas.matrix dimensions must be positive, got (0, 3)
// CHECK-NOT: Traceback
// COMPILE: type_parameters_refused.mlir:8:37: error: kas.matrix dimensions must be positive, got (0, 3)
// COMPILE-NOT: Traceback

// -----
builtin.module {
  kas.program @p(%A: !kas.tensor<4x0x4>) -> (B : !kas.scalar) {
  }
}
// CHECK: type_parameters_refused.mlir:18:22: error: kas.tensor dimensions must be positive, got (4, 0, 4)

// -----
// A type of one word an element takes no parameters: `<...>` after it is an error at its place.
builtin.module {
  kas.program @p(%A: !kas.scalar<3>) -> (B : !kas.scalar) {
  }
}
// CHECK: type_parameters_refused.mlir:26:33
// CHECK: kas.scalar takes no parameters (one word an element)
