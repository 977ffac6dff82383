// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Malformed uniform values, literals and reductions are rejected by the op verifiers.

builtin.module {
  kas.program @p(%A: !kas.scalar, %C: !kas.scalar) -> (t : !kas.scalar) uniform(C) {
    %t = kas.reduce sum %C : !kas.scalar -> !kas.scalar
    kas.return %t : !kas.scalar
  }
}
// CHECK: kas.reduce needs a per-element operand; this one is uniform

// -----
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %t = kas.loop 2 iter_args(%a = %A) -> (!kas.scalar) {
      %s = kas.reduce sum %a : !kas.scalar -> !kas.scalar
      kas.yield %s : !kas.scalar
    }
    kas.return %t : !kas.scalar
  }
}
// CHECK: 'kas.reduce' expects parent op 'kas.program'

// -----
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %c = kas.constant 2.0 : !kas.scalar
    %t = kas.loop 2 iter_args(%a = %c) -> (!kas.scalar) {
      %s = kas.call @sadd(%a, %A) : (!kas.scalar, !kas.scalar) -> !kas.scalar
      kas.yield %s : !kas.scalar
    }
    kas.return %t : !kas.scalar
  }
}
// CHECK: kas.loop iter_arg 0 is uniform; a loop carries per-element values

// -----
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) uniform(B) {
    kas.return %A : !kas.scalar
  }
}
// CHECK: kas.program lists 'B' as uniform, but it is not an input

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) uniform(1) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B : !kas.scalar
  }
}
// CHECK: fuse.kernel uniform inputs [1] must be distinct input positions (0..0)

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 1) once uniform(0) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into uniform : !kas.scalar
    %b = fuse.call @sneg[elem](%a) into shared[0] : (!kas.scalar) -> !kas.scalar
    fuse.store %b to %B : !kas.scalar
  }
}
// CHECK: fuse.kernel that runs once reads every input whole: it lists no uniform inputs

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into uniform : !kas.scalar
    %b = fuse.call @sadd[elem](%a, %a) into shared[0] : (!kas.scalar, !kas.scalar) -> !kas.scalar
    fuse.store %b to %B : !kas.scalar
  }
}
// CHECK: fuse.load into the uniform place must read a uniform input of the kernel

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) uniform(0) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into uniform : !kas.scalar
    %b = fuse.call @sadd[elem](%a, %a) into uniform : (!kas.scalar, !kas.scalar) -> !kas.scalar
    fuse.store %b to %B : !kas.scalar
  }
}
// CHECK: fuse.call cannot write the uniform place: only a fuse.load of a uniform input does

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 1) once (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B reduce sum : !kas.scalar
  }
}
// CHECK: fuse.store reduce in a kernel that runs once: it has no batch to reduce

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B : !kas.scalar
  }
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %b = fuse.launch @k(%A) : (!kas.scalar) -> !kas.scalar
    %t = fuse.combine sum %b : !kas.scalar -> !kas.scalar
    kas.return %t : !kas.scalar
  }
}
// CHECK: fuse.combine sum of a kernel output that is not partials

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B reduce max : !kas.scalar
  }
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %b = fuse.launch @k(%A) : (!kas.scalar) -> !kas.scalar
    %t = fuse.combine min %b : !kas.scalar -> !kas.scalar
    kas.return %t : !kas.scalar
  }
}
// CHECK: fuse.combine min of a kernel output that is a max reduction's partials

// -----
builtin.module {
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %t = fuse.combine sum %A : !kas.scalar -> !kas.scalar
    kas.return %t : !kas.scalar
  }
}
// CHECK: fuse.combine combines the partials of a fuse.launch result

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) uniform(0) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B : !kas.scalar
  }
}
// CHECK: fuse.load of a uniform input goes into the uniform place (the block's one copy, which every element reads), not shared[0]

// -----
// A reduction's per-block partials returned as if they were its value (fuse.combine skipped).
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%A: !kas.scalar) -> (%B: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.scalar
    fuse.store %a to %B reduce sum : !kas.scalar
  }
  kas.program @p(%A: !kas.scalar) -> (t : !kas.scalar) {
    %b = fuse.launch @k(%A) : (!kas.scalar) -> !kas.scalar
    kas.return %b : !kas.scalar
  }
}
// CHECK: fuse.launch of @k: result 0 holds a sum reduction's per-block partials, which only fuse.combine reads, not kas.return
