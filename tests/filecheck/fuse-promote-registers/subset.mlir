// RUN: irfuse-opt %s --split-input-file -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p 'fuse-promote-registers{inputs=true}' | filecheck %s --check-prefix=INPUTS
// A call's result holds all its words in its threads' registers, so a reader taking some of
// them at the same start may read it there: %c (all nine words of each element, one thread
// an element) is read whole by msub33 and on its diagonal by trace_3x3: registers. A loaded
// value holds only the words of its first reader's pattern: %a, read first on its diagonal
// and then whole, stays shared even with inputs=true; %b, read whole first, too (a reader
// of fewer words is not enough to place it).
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.matrix<3x3>, %B: !kas.matrix<3x3>) -> (%S: !kas.scalar, %T: !kas.scalar, %O: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.load %B into shared[72] : !kas.matrix<3x3>
    fuse.barrier
    %s = fuse.call @trace_3x3[elem](%a) into shared[144] : (!kas.matrix<3x3>) -> !kas.scalar
    %c = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into shared[152] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @trace_3x3[elem](%c) into shared[224] : (!kas.matrix<3x3>) -> !kas.scalar
    %o = fuse.call @msub33[elem](%c, %b) into shared[232] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %u = fuse.call @trace_3x3[elem](%b) into shared[304] : (!kas.matrix<3x3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %S : !kas.scalar
    fuse.store %t to %T : !kas.scalar
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0]
// CHECK-NEXT: %b = fuse.load %B into shared[72]
// CHECK:      %c = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into reg
// CHECK-NEXT: %t = fuse.call @trace_3x3[elem](%c) into shared[224]
// INPUTS:      %a = fuse.load %A into shared[0]
// INPUTS-NEXT: %b = fuse.load %B into shared[72]
// INPUTS:      %c = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into reg

// -----

// The reader must start where the writer's threads start: a row-mapped product's threads
// hold rows (three threads an element), which trace_3x3[elem]'s one thread an element does
// not, so %c stays shared.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%A: !kas.matrix<3x3>) -> (%T: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %c = fuse.call @mmul33[row](%a, %a) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %t = fuse.call @trace_3x3[elem](%c) into shared[144] : (!kas.matrix<3x3>) -> !kas.scalar
    fuse.barrier
    fuse.store %t to %T : !kas.scalar
  }
}
// CHECK: %c = fuse.call @mmul33[row](%a, %a) into shared[72]
