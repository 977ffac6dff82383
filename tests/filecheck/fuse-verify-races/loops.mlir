// RUN: irfuse-opt %s --split-input-file --verify-diagnostics -p fuse-verify-races 2>&1 | filecheck %s
// Races around a loop's back edge: the copy at the end of an iteration writes rows of %m
// that the next iteration's call reads from other threads. With a barrier at the start of
// the body the kernel is clean.
builtin.module {
  fuse.kernel @back_edge block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %m0 = fuse.copy %a into shared[36] : !kas.matrix<3x3>
    fuse.barrier
    %r = fuse.loop 3 iter_args(%m = %m0) -> (!kas.matrix<3x3> into shared[36]) {
      %t = fuse.call @mmul33[row](%m, %m) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      fuse.barrier
      %n = fuse.copy %t into shared[36] : !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    fuse.barrier
    %z = fuse.copy %r into shared[108] : !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// The race is reported at the op whose access meets the earlier one: the call, in the next iteration.
// CHECK: loops.mlir:12:7: error: race in fuse.kernel @back_edge: op 7 (fuse.copy of %t into %r) writes shared word 39 and op 5 (fuse.call @mmul33[row] into %t) touches it from another thread with no fuse.barrier between them
// CHECK-NEXT: %t = fuse.call @mmul33[row](%m, %m) into shared[72]
// CHECK-NEXT: ^
// CHECK-NEXT: note: ops are counted from 0 in the kernel body, barriers included (a fuse.loop, the ops of its body and its fuse.yield in order)
// CHECK-NOT: error

// -----
// A loop of one iteration has no back edge: the same kernel is clean.
builtin.module {
  fuse.kernel @once block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %m0 = fuse.copy %a into shared[36] : !kas.matrix<3x3>
    fuse.barrier
    %r = fuse.loop 1 iter_args(%m = %m0) -> (!kas.matrix<3x3> into shared[36]) {
      %t = fuse.call @mmul33[row](%m, %m) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      fuse.barrier
      %n = fuse.copy %t into shared[36] : !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    fuse.barrier
    %z = fuse.copy %r into shared[108] : !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK: fuse.kernel @once
// CHECK: fuse.loop 1

// -----
// A value defined before the loop and read in every iteration must not be overwritten in
// the body: %b, made in the body, takes words of %a, which the next iteration reads again.
builtin.module {
  fuse.kernel @reuse block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %m0 = fuse.copy %a into reg : !kas.matrix<3x3>
    %r = fuse.loop 2 iter_args(%m = %m0) -> (!kas.matrix<3x3> into reg) {
      %t = fuse.call @madd33[elem](%m, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
      %b = fuse.call @mneg33[elem](%t) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
      %n = fuse.copy %b into reg : !kas.matrix<3x3>
      fuse.yield %n : !kas.matrix<3x3>
    }
    %z = fuse.copy %r into shared[36] : !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK: loops.mlir:63:7: error: fuse.kernel @reuse: op 5 (fuse.call @mneg33[elem] into %b) overwrites shared words 0..35 of %a, which op 4 (fuse.call @madd33[elem] into %t) reads later (in the loop's next iteration)
