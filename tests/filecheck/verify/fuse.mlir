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


// -----
// An implementation needs as many threads per element as it was written for: a `row` call
// (3 threads per element) in a kernel of bx = 1 would compute only its first row.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.call @mtrans33[row](%a) into shared[576] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: implementation 'row' of 'mtrans33' runs with 3 threads per element, but its kernel has bx = 1

// -----
// fuse.launch names a kernel that exists, with its signature.
builtin.module {
  kas.program @p(%A : !kas.matrix<3x3>) -> (B : !kas.matrix<3x3>) {
    %B = fuse.launch @nowhere(%A) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.launch of @nowhere: no such fuse.kernel in the module

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
  kas.program @p(%v : !kas.vector<3>) -> (B : !kas.matrix<3x3>) {
    %B = fuse.launch @k(%v) : (!kas.vector<3>) -> !kas.matrix<3x3>
    kas.return %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.launch of @k: operand types (!kas.vector<3>) do not match the kernel's inputs (!kas.matrix<3x3>)

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
  kas.program @p(%A : !kas.matrix<3x3>) -> (B : !kas.vector<3>) {
    %B = fuse.launch @k(%A) : (!kas.matrix<3x3>) -> !kas.vector<3>
    kas.return %B : !kas.vector<3>
  }
}
// CHECK: fuse.launch of @k: result types (!kas.vector<3>) do not match the kernel's outputs (!kas.matrix<3x3>)


// -----
// What passes hand on is declared: a prediction is an integer, remap a unit flag.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  } {predicted_ns = "fast"}
}
// CHECK: Operation does not verify: "fast" should be of base attribute builtin.int

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.call @mtrans33[elem](%a) into shared[576] : (!kas.matrix<3x3>) -> !kas.matrix<3x3> {remap = 1 : i32}
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: Operation does not verify: 1 : i32 should be of base attribute unit

// -----
// A place beyond the shared memory any block can have is refused where it is written
// (it used to compile, and crash at run time).
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[99999999] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: shared[99999999] for 64 elements of 9 words ends at word 100000575 (400002300 bytes): a block has at most 232448 bytes of shared memory

// -----
// The limit is in bytes: the same words fit in float32 and not in float64.
builtin.module attributes {kas.element_type = f64} {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[50000] : !kas.matrix<3x3>
    fuse.store %a to %B : !kas.matrix<3x3>
  }
}
// CHECK: shared[50000] for 64 elements of 9 words ends at word 50576 (404608 bytes)
