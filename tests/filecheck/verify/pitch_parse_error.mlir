// RUN: not irfuse-opt %s 2>&1 | filecheck %s
// A zero pitch is a parse error at its position: no pitch is written by leaving it out.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0, pitch 0] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: pitch_parse_error.mlir:5:45
// CHECK: a pitch must be positive (leave it out for none)
