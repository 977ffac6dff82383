// RUN: irfuse-opt %s --split-input-file --verify-diagnostics -p fuse-verify-races 2>&1 | filecheck %s
// Threads that run several elements each (element y on thread row y % rows): a call's thread
// (tx, row) writes its elements' words; another thread of the row reading them with no barrier
// between is a race, as the same thread reading them is not.
builtin.module {
  fuse.kernel @row_race block(bx = 3, by = 8, elements_per_thread = 2) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %t = fuse.call @mtrans33[row](%a) into shared[72] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %z = fuse.call @madd33[row](%t, %t) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %u = fuse.call @mtrans33[row](%z) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %u to %Z : !kas.matrix<3x3>
  }
}
// mtrans33[row] writes row tx of its result and madd33[row] reads row tx: the same thread, no
// race; the second mtrans33[row] reads column tx of %z, written by the row's other threads.
// CHECK: error: race in fuse.kernel @row_race: op 3 (fuse.call @madd33[row] into %z) writes shared word 147 and op 4 (fuse.call @mtrans33[row] into %u) touches it from another thread with no fuse.barrier between them
// CHECK-NOT: op 2 (fuse.call @mtrans33[row] into %t) writes

// -----
builtin.module {
  fuse.kernel @row_clean block(bx = 3, by = 8, elements_per_thread = 2) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %t = fuse.call @mtrans33[row](%a) into shared[72] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %z = fuse.call @madd33[row](%t, %t) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %u = fuse.call @mtrans33[row](%z) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %u to %Z : !kas.matrix<3x3>
  }
}
// CHECK-NOT: error: race in fuse.kernel @row_clean
