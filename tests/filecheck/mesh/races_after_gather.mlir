// RUN: not irfuse-opt %s -p fuse-verify-races 2>&1 | filecheck %s
// RUN: irfuse-opt %s -p fuse-place-barriers,fuse-verify-races | filecheck %s --check-prefix=PLACED
// A gathering kernel whose barriers were taken out: the gathered words race with the calls
// that read them (a gather is a load of the block), and fuse-place-barriers puts one back.
builtin.module {
  fuse.kernel @gathered_k0_mtmul_4x3_4x3_mmul_4x3_3x3_scale_4x3_s block(bx = 1, by = 128) uniform(3) (%X: !kas.vector<3>, %conn: !kas.index<4>, %u: !kas.vector<3>, %s: !kas.scalar) -> (%fe: !kas.matrix<4x3>) {
    %Xe = fuse.load %X gather %conn into shared[0, pitch 13] : !kas.matrix<4x3>
    %ue = fuse.load %u gather %conn into shared[1664, pitch 13] : !kas.matrix<4x3>
    %s_1 = fuse.load %s into uniform : !kas.scalar
    %H = fuse.call @mtmul_4x3_4x3[elem](%Xe, %ue) into reg : (!kas.matrix<4x3>, !kas.matrix<4x3>) -> !kas.matrix<3x3>
    %fe_1 = fuse.call @mmul_4x3_3x3[elem](%Xe, %H) into reg : (!kas.matrix<4x3>, !kas.matrix<3x3>) -> !kas.matrix<4x3>
    %fe_2 = fuse.call @scale_4x3_s[elem](%fe_1, %s_1) into shared[0, pitch 13] : (!kas.matrix<4x3>, !kas.scalar) -> !kas.matrix<4x3>
    fuse.store %fe_2 to %fe scatter : !kas.matrix<4x3>
  } {predicted_ns = #builtin.int<246028>, group = "mtmul_4x3_4x3[elem] mmul_4x3_3x3[elem] scale_4x3_s[elem]"}
  kas.program @gathered(%X: !kas.vector<3>, %u: !kas.vector<3>, %conn: !kas.index<4>, %s: !kas.scalar) -> (r : !kas.vector<3>) uniform(s) nodal(X, u, r) {
    %fe = fuse.launch @gathered_k0_mtmul_4x3_4x3_mmul_4x3_3x3_scale_4x3_s(%X, %conn, %u, %s) : (!kas.vector<3>, !kas.index<4>, !kas.vector<3>, !kas.scalar) -> !kas.matrix<4x3>
    %r = kas.scatter %fe, %conn : (!kas.matrix<4x3>, !kas.index<4>) -> !kas.vector<3>
    kas.return %r : !kas.vector<3>
  }
}


// CHECK: error: race in fuse.kernel @gathered_k0_{{.*}}: op 0 (fuse.load of %Xe) writes shared word 0 and op 3 (fuse.call @mtmul_4x3_4x3[elem] into %H) touches it from another thread with no fuse.barrier between them

// PLACED:      %ue = fuse.load %u gather %conn into shared[1664, pitch 13]
// PLACED-NEXT: %s_1 = fuse.load %s into uniform
// PLACED-NEXT: fuse.barrier
// PLACED-NEXT: %H = fuse.call @mtmul_4x3_4x3[elem]
