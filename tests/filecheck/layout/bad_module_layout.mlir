// RUN: not irfuse-opt %s -p fuse-each 2>&1 | filecheck %s
// A module attribute kas.layout other than "aos" or "soa" is a clear error, not a crash.
builtin.module attributes {kas.layout = "columns"} {
  kas.program @p(%A: !kas.matrix<3x3>) -> (F : !kas.matrix<3x3>) {
    %F = kas.call @madd33(%A, %A) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %F : !kas.matrix<3x3>
  }
}
// CHECK: error: module attribute kas.layout must be "aos" or "soa", got "columns"
// CHECK-NOT: Traceback
