// RUN: not irfuse-opt %s -p fuse-verify-races 2>&1 | filecheck %s
// The sum-factorized element of sum_factorized.mlir, allocated, with the barrier between its
// first two calls dropped: the second's line (j, a) reads t1[k, b, a] for every b, words the
// first's lines (b, a) of other threads wrote, which the race proof refuses, naming both calls.
builtin.module {
  fuse.kernel @bk1_race block(bx = 16, by = 8) uniform(0) (%B: !kas.matrix<4x3>, %U: !kas.tensor<3x3x3>) -> (%Y: !kas.tensor<4x4x3>) {
    %b = fuse.load %B into uniform : !kas.matrix<4x3>
    %u = fuse.load %U into shared[0] : !kas.tensor<3x3x3>
    fuse.barrier
    %t1 = fuse.call @contract_kc_cba_kba_4x3_3x3x3[line](%b, %u) into shared[1032, pitch 37] : (!kas.matrix<4x3>, !kas.tensor<3x3x3>) -> !kas.tensor<4x3x3> {remap}
    %t2 = fuse.call @contract_jb_kba_kja_4x3_4x3x3[line](%b, %t1) into shared[0] : (!kas.matrix<4x3>, !kas.tensor<4x3x3>) -> !kas.tensor<4x4x3> {remap}
    fuse.barrier
    fuse.store %t2 to %Y : !kas.tensor<4x4x3>
  }
}
// CHECK: error: race in fuse.kernel @bk1_race: op 3 (fuse.call @contract_kc_cba_kba_4x3_3x3x3[line] into %t1) writes shared word 1035 and op 4 (fuse.call @contract_jb_kba_kja_4x3_4x3x3[line] into %t2) touches it from another thread with no fuse.barrier between them
