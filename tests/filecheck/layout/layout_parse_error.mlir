// RUN: not irfuse-opt %s 2>&1 | filecheck %s
// A kernel's layout keyword is aos or soa: anything else is a parse error at its position.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) layout(columns) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    fuse.store %a to %O : !kas.matrix<3x3>
  }
}
// CHECK:      layout_parse_error.mlir:4:47
// CHECK-NEXT: fuse.kernel @k block(bx = 1, by = 8) layout(columns)
// CHECK-NEXT: ^^^^^^^
// CHECK-NEXT: layout must be aos or soa, got 'columns'
