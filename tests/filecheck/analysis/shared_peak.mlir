// RUN: irfuse-opt %s -p test-print-shared-peak 2>&1 >/dev/null | filecheck %s
// RUN: irfuse-opt %s -p fuse-allocate-shared,test-print-shared-peak 2>&1 >/dev/null | filecheck %s --check-prefix=ALLOC
// Three 3x3 values of 4 elements (36 words each), sequential offsets: 108 words allocated.
// %a is last read by the call making %b, so %a and %c are never live together: the peak
// of live values is 72 words, which fuse-allocate-shared reaches by giving %c %a's words.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<3x3>) -> (%C: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[elem](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %c = fuse.call @madd33[elem](%b, %b) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<3x3>
  }
}
// CHECK: shared words in @k: peak 72 live, 108 allocated
// ALLOC: shared words in @k: peak 72 live, 72 allocated
