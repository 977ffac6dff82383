// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Every kernel of a module shares the module's layout (kas.layout).
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) layout(soa) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    fuse.store %a to %O : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @k is laid out soa but the module's global arrays are aos (kas.layout): every kernel of a module shares its layout

// -----
builtin.module attributes {kas.layout = "soa"} {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    fuse.store %a to %O : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @k is laid out aos but the module's global arrays are soa (kas.layout)

