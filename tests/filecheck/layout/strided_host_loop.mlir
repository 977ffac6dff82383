// RUN: not irfuse-opt %s -t cuda 2>&1 | filecheck %s
// A loop run from the host reads and writes its carried values in buffers of its own: the
// program input it starts from cannot be a strided view, nor can its result be returned
// into one.
builtin.module attributes {kas.strides = {x = "6,1"}} {
  fuse.kernel @power_iteration_k0_mvmul33_venorm3_srcp_etc block(bx = 1, by = 128) (%A: !kas.matrix<3x3>, %x: !kas.vector<3>) -> (%x_1: !kas.vector<3>) {
    %A_1 = fuse.load %A into shared[0] : !kas.matrix<3x3>
    %x_2 = fuse.load %x into shared[1152] : !kas.vector<3>
    fuse.barrier
    %x_3 = fuse.call @mvmul33[elem](%A_1, %x_2) into shared[1536] : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    %n = fuse.call @venorm3[elem](%x_3) into shared[1920] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    %n_1 = fuse.call @srcp[elem](%n) into shared[2048] : (!kas.scalar) -> !kas.scalar
    fuse.barrier
    %x_4 = fuse.call @svmul3[elem](%x_3, %n_1) into shared[2176] : (!kas.vector<3>, !kas.scalar) -> !kas.vector<3>
    fuse.barrier
    fuse.store %x_4 to %x_1 : !kas.vector<3>
  } {predicted_ns = #builtin.int<84387>, group = "mvmul33[elem] venorm3[elem] srcp[elem] svmul3[elem]"}
  kas.program @power_iteration(%A: !kas.matrix<3x3>, %x: !kas.vector<3>) -> (x : !kas.vector<3>) {
    %x_1 = kas.loop 100 iter_args(%x_2 = %x) -> (!kas.vector<3>) {
      %x_3 = fuse.launch @power_iteration_k0_mvmul33_venorm3_srcp_etc(%A, %x_2) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
      kas.yield %x_3 : !kas.vector<3>
    }
    kas.return %x_1 : !kas.vector<3>
  }
}

// CHECK: error: input 'x' is read by a loop run from the host, which takes contiguous arrays: a strided view cannot be given for it
