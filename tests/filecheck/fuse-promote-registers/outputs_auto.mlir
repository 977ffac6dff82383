// RUN: irfuse-opt %s -p 'fuse-promote-registers{inputs=false}' | filecheck %s
// RUN: sed 's/^builtin.module {/builtin.module attributes {kas.element_type = f64} {/' %s | irfuse-opt -p 'fuse-promote-registers{inputs=false}' | filecheck %s --check-prefix=F64
// RUN: irfuse-opt %s -p 'fuse-promote-registers{inputs=false outputs=false}' | filecheck %s --check-prefix=NONE
// RUN: not irfuse-opt %s -p 'fuse-promote-registers{outputs=some}' 2>&1 | filecheck %s --check-prefix=BAD
// outputs=auto (the default): a stored value is written by each thread from its registers
// where that costs a warp's L1 fewer wavefronts than the block's way (`promotion._stores_cheaper`):
// the producer's shared writes (a wavefront a word), the copy's lines read and written, and
// each reader's shared reads. %s's 24-byte rows, 8-byte stores (`kernel.policies.row_vector`): 3
// stores on the warp's 6 lines (18) against 6 + 12 + 6 (vdot6 reads it): registers. %p's
// 36-byte rows, 4-byte stores: 81 against 9 + 18 + 9: shared. %t, a scalar: shared. In float64
// none (its 48-byte stress from registers measured slower); outputs=false: none; another word
// is refused by name.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.vector<6>, %M: !kas.matrix<3x3>) -> (%S: !kas.vector<6>, %W: !kas.scalar, %P: !kas.matrix<3x3>, %T: !kas.scalar) {
    %a = fuse.load %A into shared[0] : !kas.vector<6>
    %m = fuse.load %M into shared[48] : !kas.matrix<3x3>
    fuse.barrier
    %s = fuse.call @add_6_6[elem](%a, %a) into shared[120] : (!kas.vector<6>, !kas.vector<6>) -> !kas.vector<6>
    %w = fuse.call @vdot6[elem](%s, %a) into shared[168] : (!kas.vector<6>, !kas.vector<6>) -> !kas.scalar
    %p = fuse.call @add_3x3_3x3[elem](%m, %m) into shared[176] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @trace_3x3[elem](%p) into shared[248] : (!kas.matrix<3x3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %S : !kas.vector<6>
    fuse.store %w to %W : !kas.scalar
    fuse.store %p to %P : !kas.matrix<3x3>
    fuse.store %t to %T : !kas.scalar
  }
}
// CHECK:      %s = fuse.call @add_6_6[elem](%a, %a) into reg
// CHECK-NEXT: %w = fuse.call @vdot6[elem](%s, %a) into shared[168]
// CHECK-NEXT: %p = fuse.call @add_3x3_3x3[elem](%m, %m) into shared[176]
// CHECK-NEXT: %t = fuse.call @trace_3x3[elem](%p) into shared[248]
// F64:        %s = fuse.call @add_6_6[elem](%a, %a) into shared[120]
// NONE:       %s = fuse.call @add_6_6[elem](%a, %a) into shared[120]
// BAD:        error: fuse-promote-registers: outputs must be auto, true or false, got 'some'
