// RUN: irfuse-opt %s -t cuda | filecheck %s
// Program inputs and outputs that are strided views (`kas.strides`: strides in words, batch
// axis first) are read and written word by word at their strides, in the GPU kernels and
// their CPU versions alike: A's values transposed in a batch of every other element, v's
// elements in reverse, B written into 4x4 values; the launch after the one that writes B
// reads it back from the same view. Arguments not named keep the 16-byte block copies.
builtin.module attributes {kas.strides = {A = "18,1,3", v = "-3,1", "out.B" = "16,4,1"}} {
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

// CHECK:      void __launch_bounds__(128, 10) s_k0_madd33(
// CHECK:        for (int irf_i = tid; irf_i < count * 9; irf_i += 128) { const int e = irf_i / 9, k = irf_i % 9; smem[0 + e * 9 + k] = g_A[(long long)(first + e) * 18 + (long long)((k) % 3) * 3 + (long long)((k) / 3) * 1]; }
// CHECK-NOT:    irf_load_async16
// CHECK:        for (int irf_i = tid; irf_i < count * 9; irf_i += 128) { const int e = irf_i / 9, k = irf_i % 9; g_B[(long long)(first + e) * 16 + (long long)((k) % 3) * 1 + (long long)((k) / 3) * 4] = smem[1152 + e * 9 + k]; }
// CHECK:      static int s_k0_madd33(
// CHECK:          smem[0 + e * 9 + k] = g_A[(long long)(first + e) * 18 + (long long)((k) % 3) * 3 + (long long)((k) / 3) * 1]; }
// CHECK:      void __launch_bounds__(128, 8) s_k1_mvmul33(
// CHECK:        smem[0 + e * 9 + k] = g_B[(long long)(first + e) * 16 + (long long)((k) % 3) * 1 + (long long)((k) / 3) * 4]; }
// CHECK:        for (int irf_i = tid; irf_i < count * 3; irf_i += 128) { const int e = irf_i / 3, k = irf_i % 3; smem[1152 + e * 3 + k] = g_v[(long long)(first + e) * -3 + (long long)(k) * 1]; }
// CHECK:        irf_copy16(g_w + first * 3, smem + 1536, count * 3, tid, 128);
