// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s -p fuse-promote-registers -t cuda | filecheck %s --check-prefix=CUDA
// A reader may take words that start past the first its value's producer writes: %m's second
// row (words 3-5), read by item_1_3x3 alone, its only reader. In registers each thread's array
// holds %m from its first word, so the reader is handed the array three words on (`r_m + 3` in the CUDA C);
// before, only readers at the producer's own start were taken, and %m was staged in shared
// memory. %n's rows are read at two places by two readers, one after the other right after it.
// %k is read by item_1_3x3 and then whole by a call two calls later: it stays shared.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.matrix<3x3>, %B: !kas.matrix<3x3>) -> (%R: !kas.vector<3>, %S: !kas.vector<3>, %T: !kas.vector<3>, %U: !kas.vector<3>, %V: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %b = fuse.load %B into reg : !kas.matrix<3x3>
    %m = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into shared[0] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %r = fuse.call @item_1_3x3[elem](%m) into reg : (!kas.matrix<3x3>) -> !kas.vector<3>
    %n = fuse.call @mmul_3x3_3x3[elem](%a, %b) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %s = fuse.call @item_2_3x3[elem](%n) into reg : (!kas.matrix<3x3>) -> !kas.vector<3>
    %t = fuse.call @item_1_3x3[elem](%n) into reg : (!kas.matrix<3x3>) -> !kas.vector<3>
    %k = fuse.call @mmul_3x3_3x3[elem](%b, %a) into shared[144] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %u = fuse.call @item_1_3x3[elem](%k) into reg : (!kas.matrix<3x3>) -> !kas.vector<3>
    %i = fuse.call @inv_3x3[elem](%a) into reg : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %v = fuse.call @mmul_3x3_3x3[elem](%k, %i) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %r to %R : !kas.vector<3>
    fuse.store %s to %S : !kas.vector<3>
    fuse.store %t to %T : !kas.vector<3>
    fuse.store %u to %U : !kas.vector<3>
    fuse.store %v to %V : !kas.matrix<3x3>
  }
}
// CHECK:      %m = fuse.call @mtmul_3x3_3x3[elem](%a, %b) into reg
// CHECK-NEXT: %r = fuse.call @item_1_3x3[elem](%m) into reg
// CHECK-NEXT: %n = fuse.call @mmul_3x3_3x3[elem](%a, %b) into reg
// CHECK-NEXT: %s = fuse.call @item_2_3x3[elem](%n) into reg
// CHECK-NEXT: %t = fuse.call @item_1_3x3[elem](%n) into reg
// CHECK-NEXT: %k = fuse.call @mmul_3x3_3x3[elem](%b, %a) into shared[144]

// CUDA:      if (active) irf_item_1_3x3_elem_rr(tx, ty, (r_m + 3), r_r);
// CUDA:      if (active) irf_item_2_3x3_elem_rr(tx, ty, (r_n + 6), r_s);
// CUDA:      if (active) irf_item_1_3x3_elem_rr(tx, ty, (r_n + 3), r_t);
// CUDA:      if (active) irf_item_1_3x3_elem_sr(tx, ty, smem + 144, r_u);
