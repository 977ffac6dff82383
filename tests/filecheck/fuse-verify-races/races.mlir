// RUN: irfuse-opt %s --split-input-file --verify-diagnostics -p fuse-verify-races 2>&1 | filecheck %s
// A load read by other threads without a barrier, and a store reading another thread's
// result without a barrier, are races; the diagnostic names both accesses.
builtin.module {
  fuse.kernel @load_race block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %z = fuse.call @mtrans33[elem](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK: error: race in fuse.kernel @load_race: op 0 (fuse.load of %a) writes shared word 0 and op 1 (fuse.call @mtrans33[elem] into %z) touches it from another thread with no fuse.barrier between them

// -----
builtin.module {
  fuse.kernel @store_race block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %z = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK: error: race in fuse.kernel @store_race: op 2 (fuse.call @mtrans33[row] into %z) writes shared word 36 and op 3 (fuse.store of %z) touches it

// -----
// Padded values (element e of %a at word 5*e): the block-wide load writes every element from
// any thread and the elem call reads them with no barrier between.
builtin.module {
  fuse.kernel @padded_race block(bx = 1, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0, pitch 5] : !kas.matrix<2x2>
    %c = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK: error: race in fuse.kernel @padded_race: op 0 (fuse.load of %a) writes shared word 0 and op 1 (fuse.call @mmul22[elem] into %c) touches it from another thread

// -----
// Two values whose lifetimes overlap on the same shared words: %b is written over %a's words
// while %a is still to be read (by %c). No thread races with another here (each element's
// thread reads and writes its own words, with barriers), but %c would read %b's entries.
builtin.module {
  fuse.kernel @overlap block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%C: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[elem](%a) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %c = fuse.call @madd33[elem](%a, %b) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<3x3>
  }
}
// CHECK: error: fuse.kernel @overlap: op 2 (fuse.call @mtrans33[elem] into %b) overwrites shared words 0..35 of %a, which op 4 (fuse.call @madd33[elem] into %c) reads later
