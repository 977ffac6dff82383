// RUN: irfuse-opt %s --split-input-file -p fuse-promote-registers | filecheck %s
// A value of more words a thread than a thread's registers (255) stays in shared memory:
// %b, 256 words an element on one thread, though its writer and reader agree; %c, 255, goes
// to registers. (In registers it would live in local memory, and its calls' straight-line
// code of hundreds of words a thread ran the host C++ compiler out of memory.)
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%A: !kas.matrix<16x16>, %C: !kas.matrix<15x17>) -> (%O: !kas.matrix<16x16>, %P: !kas.matrix<15x17>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<16x16>
    %c0 = fuse.load %C into shared[1024] : !kas.matrix<15x17>
    fuse.barrier
    %b = fuse.call @neg_16x16[elem](%a) into shared[2048] : (!kas.matrix<16x16>) -> !kas.matrix<16x16>
    %o = fuse.call @neg_16x16[elem](%b) into shared[3072] : (!kas.matrix<16x16>) -> !kas.matrix<16x16>
    %c = fuse.call @neg_15x17[elem](%c0) into shared[4096] : (!kas.matrix<15x17>) -> !kas.matrix<15x17>
    %p = fuse.call @neg_15x17[elem](%c) into shared[5120] : (!kas.matrix<15x17>) -> !kas.matrix<15x17>
    fuse.barrier
    fuse.store %o to %O : !kas.matrix<16x16>
    fuse.store %p to %P : !kas.matrix<15x17>
  }
}
// CHECK:      %b = fuse.call @neg_16x16[elem](%a) into shared[2048]
// CHECK:      %c = fuse.call @neg_15x17[elem](%c0) into reg
