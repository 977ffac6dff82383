// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Malformed fuse.loop IR is rejected: a carried place is written only by fuse.copy (the
// iter_args and the yielded values), one place per result, a positive trip count, a store
// only at the kernel's top level.

builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %a) -> (!kas.matrix<3x3> into reg) {
      %n = fuse.copy %m into reg : !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.loop iter_arg 0 must be a fuse.copy into the loop's place reg for it

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      %n = fuse.call @madd33[elem](%m, %m) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.yield value 0 must be a fuse.copy into the loop's place reg for it (or block argument 0, carried unchanged)

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into shared[36] : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %c) -> (!kas.matrix<3x3> into shared[72]) {
      fuse.yield %m : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.loop iter_arg 0 must be a fuse.copy into the loop's place shared[72] for it

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 0 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      fuse.yield %m : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.loop trip count must be at least 1, got 0

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      %s = fuse.copy %m into shared[36] : !kas.matrix<3x3>
      fuse.store %s to %B : !kas.matrix<3x3>
      fuse.yield %m : !kas.matrix<3x3>
    }
  }
}
// CHECK: 'fuse.store' expects parent op 'fuse.kernel'

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into shared[1000000] : !kas.matrix<3x3>
    fuse.store %c to %B : !kas.matrix<3x3>
  }
}
// CHECK: shared[1000000] for 4 elements of 9 words ends at word 1000036 (4000144 bytes): a block has at most 232448 bytes of shared memory

// -----
// A trip count past what a kernel's 32-bit loop counter (and any reasonable run) allows.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 99999999999 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      fuse.yield %m : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.loop runs 99,999,999,999 iterations with its enclosing loops; at most 1,000,000 are allowed

// -----
// Nested loops count their trip counts multiplied.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %c = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 2000 iter_args(%m = %c) -> (!kas.matrix<3x3> into reg) {
      %d = fuse.copy %m into reg : !kas.matrix<3x3>
      %s = fuse.loop 1000 iter_args(%q = %d) -> (!kas.matrix<3x3> into reg) {
        fuse.yield %q : !kas.matrix<3x3>
      }
      %e = fuse.copy %s into reg : !kas.matrix<3x3>
      fuse.yield %e : !kas.matrix<3x3>
    }
    %b = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK: fuse.loop runs 2,000,000 iterations with its enclosing loops; at most 1,000,000 are allowed
