// RUN: irfuse-opt %s -p fuse-remap-threads,fuse-promote-registers,fuse-linearize,fuse-allocate-shared,fuse-place-barriers,fuse-verify-races | filecheck %s --check-prefix=IR
// RUN: irfuse-opt %s -p fuse-remap-threads,fuse-promote-registers,fuse-linearize,fuse-allocate-shared,fuse-place-barriers,fuse-verify-races -t cuda | filecheck %s
// A scalar reduced twice by a kernel whose threads run four elements each: the value stays in
// registers (a value only reduced is not stored by threads), and each tree takes its steps of
// strides 128 and 64 on a copy of the thread's rows (element ty + a*64 is row a): 128 pairs
// rows 0 and 2, 1 and 3, then 64 rows 0 and 1, each pair only where its second element is in
// the batch; the thread's combined element is staged, and the rest goes as before.
// (The kernel as the search planned it for `s = venorm3(v); t = sum(s); m = max(s)` before
// it priced starting blocks: the planner now takes 512 elements on 256 threads for it.)
builtin.module {
  fuse.kernel @per_thread_tree_k0_venorm3_sum_max block(bx = 1, by = 256, elements_per_thread = 4) (%v: !kas.vector<3>) -> (%t: !kas.scalar, %m: !kas.scalar) {
    %v_1 = fuse.load %v into shared[0] : !kas.vector<3>
    fuse.barrier
    %s = fuse.call @venorm3[elem](%v_1) into shared[768] : (!kas.vector<3>) -> !kas.scalar
    fuse.barrier
    fuse.store %s to %t reduce sum : !kas.scalar
    fuse.store %s to %m reduce max : !kas.scalar
  }
  kas.program @per_thread_tree(%v: !kas.vector<3>) -> (t : !kas.scalar, m : !kas.scalar) {
    %t_partials, %m_partials = fuse.launch @per_thread_tree_k0_venorm3_sum_max(%v) : (!kas.vector<3>) -> (!kas.scalar, !kas.scalar)
    %t = fuse.combine sum %t_partials : !kas.scalar -> !kas.scalar
    %m = fuse.combine max %m_partials : !kas.scalar -> !kas.scalar
    kas.return %t, %m : !kas.scalar, !kas.scalar
  }
}
// IR:      fuse.kernel @per_thread_tree_k0_venorm3_sum_max block(bx = 1, by = 256, elements_per_thread = 4)
// IR:        %s = fuse.call @venorm3[elem](%v_1) into reg
// IR-NEXT:   fuse.store %s to %t reduce sum : !kas.scalar
// IR-NEXT:   fuse.store %s to %m reduce max : !kas.scalar
// CHECK:      // sum of s over the block's elements into t's partials
// CHECK-NEXT: { // the steps of strides 128 to 64 on the thread's own rows
// CHECK-NEXT:   real_t irf_v[4];
// CHECK-NEXT:   for (int irf_j = 0; irf_j < 4; ++irf_j) irf_v[irf_j] = r_s[irf_j];
// CHECK-NEXT:   if (ty + 128 < count) { irf_v[0] = irf_v[0] + irf_v[2]; }
// CHECK-NEXT:   if (ty + 192 < count) { irf_v[1] = irf_v[1] + irf_v[3]; }
// CHECK-NEXT:   if (ty + 64 < count) { irf_v[0] = irf_v[0] + irf_v[1]; }
// CHECK-NEXT:   if (ty < count) { irf_red0[ty * 1 + 0] = irf_v[0]; }
// CHECK-NEXT: }
// CHECK:      // max of s over the block's elements into m's partials
// CHECK-NEXT: { // the steps of strides 128 to 64 on the thread's own rows
// CHECK-NEXT:   real_t irf_v[4];
// CHECK-NEXT:   for (int irf_j = 0; irf_j < 4; ++irf_j) irf_v[irf_j] = r_s[irf_j];
// CHECK-NEXT:   if (ty + 128 < count) { irf_v[0] = irf_max(irf_v[0], irf_v[2]); }
