// RUN: irfuse-opt %s -t cuda | filecheck %s
// A padded shared value (pitch 5 for 4-word 2x2 matrices): the load scatters each element to
// its pitch with asynchronous word copies, the device function is handed the element's base
// moved by ty*(5 - 4) words, and the store gathers elements back into contiguous global memory.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0, pitch 5] : !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK:      template <int SIZE, int PITCH>
// CHECK-NEXT: __device__ __forceinline__ void irf_load_pitched(
// CHECK:        real_t* d = dst + (i / SIZE) * PITCH + i % SIZE;
// CHECK:        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n"
// CHECK:      // fuse.kernel @k: block(bx = 1, by = 32), 320 shared words
// CHECK:        IRFUSE_SHARED_STATIC(real_t, smem, 320);
// CHECK:        irf_load_pitched<4, 5>(smem + 0, g_A + first * 4, count * 4, tid, 32);
// CHECK-NEXT:   irf_async_wait();
// CHECK-NEXT:   __syncthreads();
// CHECK:        if (active) irf_mmul22_elem_sss(tx, ty, smem + 0 + ty*1, smem + 0 + ty*1, smem + 160 + ty*1);
// CHECK:        __syncthreads();
// CHECK:        irf_store_pitched<4, 5>(g_C + first * 4, smem + 160, count * 4, tid, 32);
