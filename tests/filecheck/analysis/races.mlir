// RUN: irfuse-opt %s --split-input-file -p test-print-races 2>&1 >/dev/null | filecheck %s
// The race analysis on its own: it reports, and changes nothing (fuse-verify-races refuses).

// Row mapping of a transpose reads column tx of %a: words the load copied in from any
// thread. Without a barrier after the load, the call races with it; the store then reads
// what other threads of the block wrote, with no barrier either.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK:      races in @k: 2
// CHECK-NEXT:   op 0 (fuse.load of %a) writes shared word 0; op 1 (fuse.call @mtrans33[row] into %b) touches it from another thread
// CHECK-NEXT:   op 1 (fuse.call @mtrans33[row] into %b) writes shared word 36; op 2 (fuse.store of %b) touches it from another thread

// -----
// The same kernel with its barriers: none.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}
// CHECK:      races in @k: 0

// -----
// Mixed mappings: %b is written by row (thread tx writes row tx), then read whole by the
// element mapping, which runs on thread tx = 0 only: word 39 (element 0, row 1) was
// written by thread tx = 1. The analysis names the first such word per op.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%C: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %c = fuse.call @madd33[elem](%b, %b) into shared[0] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<3x3>
  }
}
// CHECK:      races in @k: 1
// CHECK-NEXT:   op 2 (fuse.call @mtrans33[row] into %b) writes shared word 39; op 3 (fuse.call @madd33[elem] into %c) touches it from another thread
