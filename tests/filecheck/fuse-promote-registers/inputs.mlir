// RUN: irfuse-opt %s --split-input-file -p 'fuse-promote-registers{inputs=true}' | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p fuse-promote-registers | filecheck %s --check-prefix=DEFAULT
// inputs=true: a loaded value goes to registers when all its consumers run with the same
// threads and read it through compatible access patterns (%a: two elem calls; %b: one call,
// each row thread holding the whole matrix it reads); %c read through two different patterns
// (rows as mmul33's A, the whole matrix as its B) stays shared.
// By default (inputs=auto, inputs_auto.mlir) %a stays shared: each thread loading its 36-byte
// row would cost a warp's L1 81 wavefronts against 45 for the block's copy and the three reads.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %m = fuse.call @madd33[elem](%a, %a) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %o = fuse.call @msub33[elem](%m, %a) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into reg
// CHECK:      %m = fuse.call @madd33[elem](%a, %a) into reg
// DEFAULT:    %a = fuse.load %A into shared[0]

// -----

builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%B: !kas.matrix<3x3>, %C: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>, %P: !kas.matrix<3x3>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<3x3>
    %c = fuse.load %C into shared[72] : !kas.matrix<3x3>
    fuse.barrier
    %o = fuse.call @mmul33[row](%c, %b) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %p = fuse.call @mmul33[row](%c, %c) into shared[216] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %o to %O : !kas.matrix<3x3>
    fuse.store %p to %P : !kas.matrix<3x3>
  }
}
// CHECK:      %b = fuse.load %B into reg
// CHECK-NEXT: %c = fuse.load %C into shared[72]
