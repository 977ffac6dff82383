// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s --check-prefix=ROUND
// elements_per_thread: a power of two dividing by, in a kernel over the batch with neither a
// fuse.loop nor a remapped call (each thread runs its elements' statements one after another).

builtin.module {
  fuse.kernel @k block(bx = 1, by = 128, elements_per_thread = 4) (%v: !kas.vector<3>) -> (%s: !kas.scalar) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.barrier
    %r = fuse.call @venorm3[elem](%a) into shared[384] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %r to %s reduce sum : !kas.scalar
  }
}
// ROUND: fuse.kernel @k block(bx = 1, by = 128, elements_per_thread = 4) (%v: !kas.vector<3>) -> (%s: !kas.scalar) {

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 100, elements_per_thread = 8) (%v: !kas.vector<3>) -> (%s: !kas.vector<3>) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.store %a to %s reduce sum : !kas.vector<3>
  }
}
// CHECK: fuse.kernel @k: elements_per_thread = 8 must be a power of two dividing by = 100

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 96, elements_per_thread = 3) (%v: !kas.vector<3>) -> (%s: !kas.vector<3>) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.store %a to %s : !kas.vector<3>
  }
}
// CHECK: fuse.kernel @k: elements_per_thread = 3 must be a power of two dividing by = 96

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 2, elements_per_thread = 2) once (%v: !kas.scalar) -> (%s: !kas.scalar) {
    %a = fuse.load %v into shared[0] : !kas.scalar
    fuse.store %a to %s : !kas.scalar
  }
}
// CHECK: fuse.kernel @k runs once (one element): it takes no elements_per_thread

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4, elements_per_thread = 2) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      %n = fuse.call @madd33[elem](%m, %m) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      %o = fuse.copy %n into reg : !kas.matrix<3x3>
      fuse.yield %o : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @k: a kernel with a fuse.loop inside runs one element a thread (elements_per_thread = 2 given)

// -----
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8, elements_per_thread = 2) (%v: !kas.vector<3>) -> (%s: !kas.scalar) {
    %w = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.barrier
    %r = fuse.call @venorm3[elem](%w) into shared[24] : (!kas.vector<3>) -> !kas.scalar {remap}
    fuse.barrier
    fuse.store %r to %s : !kas.scalar
  }
}
// CHECK: fuse.kernel @k: a remapped call runs its elements on threads of its own: no remapping with elements_per_thread = 2
