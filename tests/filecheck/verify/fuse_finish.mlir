// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s --check-prefix=ROUND
// finish_parts: the most blocks of a launch whose partials the kernel's last block combines, a
// partial a lane of the combine (1 to 8192), on a kernel that reduces over the batch.

builtin.module {
  fuse.kernel @k block(bx = 1, by = 128) (%v: !kas.vector<3>) -> (%s: !kas.scalar) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.barrier
    %r = fuse.call @venorm3[elem](%a) into shared[384] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %r to %s reduce sum : !kas.scalar
  } {finish_parts = #builtin.int<8192>}
}
// ROUND: } {finish_parts = #builtin.int<8192>}

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 128) (%v: !kas.vector<3>) -> (%s: !kas.scalar) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.barrier
    %r = fuse.call @venorm3[elem](%a) into shared[384] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %r to %s reduce max : !kas.scalar
  } {finish_parts = #builtin.int<8193>}
}
// CHECK: fuse.kernel @k: finish_parts must be 1 to 8192 (a combine lane a partial), got 8193

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 128) (%v: !kas.vector<3>) -> (%s: !kas.vector<3>) {
    %a = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.store %a to %s : !kas.vector<3>
  } {finish_parts = #builtin.int<64>}
}
// CHECK: fuse.kernel @k has finish_parts but no reduction over the batch whose partials its last block could combine
