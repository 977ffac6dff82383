// RUN: not irfuse-opt %s -t cuda 2>&1 | filecheck %s
// Strides are whole numbers of words separated by commas.
builtin.module attributes {kas.strides = {A = "18,x"}} {
  fuse.kernel @s_k0_madd33 block(bx = 1, by = 128) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %A_1 = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %B_1 = fuse.call @madd33[elem](%A_1, %A_1) into shared[1152] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %B_1 to %B : !kas.matrix<3x3>
  }
  fuse.kernel @s_k1_mvmul33 block(bx = 1, by = 128) (%B: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (%w: !kas.vector<3>) {
    %B_1 = fuse.load %B into shared[0] : !kas.matrix<3x3>
    %v_1 = fuse.load %v into shared[1152] : !kas.vector<3>
    fuse.barrier
    %w_1 = fuse.call @mvmul33[elem](%B_1, %v_1) into shared[1536] : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    fuse.store %w_1 to %w : !kas.vector<3>
  }
  kas.program @s(%A: !kas.matrix<3x3>, %v: !kas.vector<3>) -> (B : !kas.matrix<3x3>, w : !kas.vector<3>) {
    %B = fuse.launch @s_k0_madd33(%A) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %w = fuse.launch @s_k1_mvmul33(%B, %v) : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    kas.return %B, %w : !kas.matrix<3x3>, !kas.vector<3>
  }
}

// CHECK: error: kas.strides: the strides of 'A' must be whole numbers separated by commas, got "18,x"
