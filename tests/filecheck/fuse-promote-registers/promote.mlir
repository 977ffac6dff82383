// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s -p 'fuse-promote-registers{outputs=true}' | filecheck %s --check-prefix=OUT
// %m (row -> row, compatible rows) moves to registers; %n is read whole as mmul33's B
// operand by other threads, so it stays shared; %o is stored, so it stays shared unless
// outputs=true; loaded values stay shared (the loads are coalesced block copies).
builtin.module {
  fuse.kernel @k block(bx = 3, by = 8) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %m = fuse.call @madd33[row](%a, %a) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %n = fuse.call @msub33[row](%m, %a) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %o = fuse.call @mmul33[row](%a, %n) into shared[216] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0]
// CHECK:      %m = fuse.call @madd33[row](%a, %a) into reg
// CHECK-NEXT: %n = fuse.call @msub33[row](%m, %a) into shared[144]
// CHECK:      %o = fuse.call @mmul33[row](%a, %n) into shared[216]
// OUT:        %o = fuse.call @mmul33[row](%a, %n) into reg
