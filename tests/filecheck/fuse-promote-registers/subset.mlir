// RUN: irfuse-opt %s --split-input-file -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p 'fuse-promote-registers{inputs=true}' | filecheck %s --check-prefix=INPUTS
// A call's result holds all its words in its threads' registers. Where its readers together
// take only some of them, at the same start or past it (`shifted.mlir`), it may stay there (the others are then never
// computed): %c, one thread an element, is read on its diagonal by trace_3x3 only. %d is read
// whole by msub33 and on its diagonal by trace_3x3, with another call between them: whole values
// are promoted only where every reader takes them whole, or where their readers run one after
// another right after them (`read_at_once.mlir`; live in registers across other calls until the
// last reader, they can push a kernel past its registers), so it stays shared. A loaded value holds only the words of its first
// reader's pattern: %a, read first on its diagonal and then whole, stays shared even with
// inputs=true; %b, read whole first, too.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.matrix<3x3>, %B: !kas.matrix<3x3>) -> (%S: !kas.scalar, %T: !kas.scalar, %E: !kas.scalar, %O: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %b = fuse.load %B into shared[72] : !kas.matrix<3x3>
    fuse.barrier
    %s = fuse.call @trace_3x3[elem](%a) into shared[144] : (!kas.matrix<3x3>) -> !kas.scalar
    %c = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into shared[152] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @trace_3x3[elem](%c) into shared[224] : (!kas.matrix<3x3>) -> !kas.scalar
    %d = fuse.call @mtmul_3x3_3x3[elem](%b, %a) into shared[312] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %e = fuse.call @trace_3x3[elem](%d) into shared[384] : (!kas.matrix<3x3>) -> !kas.scalar
    %u = fuse.call @trace_3x3[elem](%b) into shared[304] : (!kas.matrix<3x3>) -> !kas.scalar
    %o = fuse.call @msub33[elem](%d, %b) into shared[232] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %s to %S : !kas.scalar
    fuse.store %t to %T : !kas.scalar
    fuse.store %e to %E : !kas.scalar
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0]
// CHECK-NEXT: %b = fuse.load %B into shared[72]
// CHECK:      %c = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into reg
// CHECK-NEXT: %t = fuse.call @trace_3x3[elem](%c) into shared[224]
// CHECK-NEXT: %d = fuse.call @mtmul_3x3_3x3[elem](%b, %a) into shared[312]
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
