// RUN: not irfuse-opt %s 2>&1 | filecheck %s
// A syntax error in .mlir input names the file, line and column.
builtin.module {
  kas.program @p(%A: !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {
    %B = fuse.load %A into nowhere : !kas.matrix<3x3>
  }
}
// CHECK: parse_error.mlir:5:{{[0-9]+}}
// CHECK-NOT: Traceback
