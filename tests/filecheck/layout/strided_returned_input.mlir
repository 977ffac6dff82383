// RUN: not irfuse-opt %s -t cuda 2>&1 | filecheck %s
// An output that is an input returned as it is has no kernel to write it at its strides.
builtin.module attributes {kas.strides = {"out.A" = "18,3,1"}} {
  fuse.kernel @r_k0_madd33 block(bx = 1, by = 128) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %A_1 = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %B_1 = fuse.call @madd33[elem](%A_1, %A_1) into shared[1152] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %B_1 to %B : !kas.matrix<3x3>
  }
  kas.program @r(%A: !kas.matrix<3x3>) -> (A : !kas.matrix<3x3>, B : !kas.matrix<3x3>) {
    %B = fuse.launch @r_k0_madd33(%A) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    kas.return %A, %B : !kas.matrix<3x3>, !kas.matrix<3x3>
  }
}

// CHECK: error: output 'A' is not written by a kernel (an input returned as it is, or the result of a loop run from the host): a strided view cannot be given for it
