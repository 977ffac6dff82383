// RUN: irfuse-opt %s --split-input-file -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p 'fuse-promote-registers{inputs=false}' | filecheck %s --check-prefix=NONE
// RUN: not irfuse-opt %s --split-input-file -p 'fuse-promote-registers{inputs=some}' 2>&1 | filecheck %s --check-prefix=BAD
// inputs=auto (the default): a loaded value goes to registers where each thread loading its
// element's row costs a warp's L1 no more wavefronts than the block's copy and the readers'
// shared reads (`promotion._loads_cheaper`). %v's 12-byte rows: three 4-byte loads a thread,
// each touching the warp's 3 lines (9), against the copy's 3 lines written and read back (6)
// and one word a read (3 for vadd3): registers. %M's 36-byte rows: 9 loads on 9 lines (81)
// against 18 + 9 for its one reader: shared. A scalar's copy is one line either way: shared.
// inputs=false keeps every one shared; another word is refused by name.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%V: !kas.vector<3>, %W: !kas.vector<3>, %M: !kas.matrix<3x3>, %S: !kas.scalar) -> (%O: !kas.vector<3>, %P: !kas.matrix<3x3>, %Q: !kas.scalar) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    %w = fuse.load %W into shared[24] : !kas.vector<3>
    %m = fuse.load %M into shared[48] : !kas.matrix<3x3>
    %s = fuse.load %S into shared[120] : !kas.scalar
    fuse.barrier
    %o = fuse.call @vadd3[elem](%v, %w) into shared[128] : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    %p = fuse.call @madd33[elem](%m, %m) into shared[152] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %q = fuse.call @smul[elem](%s, %s) into shared[224] : (!kas.scalar, !kas.scalar) -> !kas.scalar
    fuse.barrier
    fuse.store %o to %O : !kas.vector<3>
    fuse.store %p to %P : !kas.matrix<3x3>
    fuse.store %q to %Q : !kas.scalar
  }
}
// CHECK:      %v = fuse.load %V into reg
// CHECK-NEXT: %w = fuse.load %W into reg
// CHECK-NEXT: %m = fuse.load %M into shared[48]
// CHECK-NEXT: %s = fuse.load %S into shared[120]
// NONE:       %v = fuse.load %V into shared[0]
// NONE-NEXT:  %w = fuse.load %W into shared[24]
// BAD:        error: fuse-promote-registers: inputs must be auto, true or false, got 'some'

// -----

// Rows read by threads that share an element (three threads an element): not weighed, shared.
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%B: !kas.matrix<3x3>, %C: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %b = fuse.load %B into shared[0] : !kas.matrix<3x3>
    %c = fuse.load %C into shared[72] : !kas.matrix<3x3>
    fuse.barrier
    %o = fuse.call @mmul33[row](%c, %b) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      %b = fuse.load %B into shared[0]
// CHECK-NEXT: %c = fuse.load %C into shared[72]
