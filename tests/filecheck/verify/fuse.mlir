// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Malformed fuse IR is rejected by the op verifiers.

builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel output must be stored exactly once, found 0 stores

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.call @madd33[rows](%a, %a) into shared[576] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: op 'madd33' has no implementation 'rows'

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    fuse.store %A to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.store stores an on-chip value

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %B into shared[0] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.load must read a kernel input argument

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
// CHECK-NEXT: %a = fuse.load %A into reg : !kas.matrix<3x3>

// -----
// A pitch is the distance between elements: smaller than the element it would overlap.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0, pitch 8] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: pitch 8 is smaller than the value's 9 words per element

