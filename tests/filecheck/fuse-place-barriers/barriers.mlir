// RUN: irfuse-opt %s -p fuse-place-barriers | filecheck %s
// Barriers stay only where another thread's access would race:
// - after the loads (calls read words other threads copied in),
// - none between calls that pass values in registers or read what the same thread wrote,
// - before a call that overwrites words other threads read earlier (%z reuses %a's words),
// - before the store (a block-wide copy reads what each thread wrote).
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%Z: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %x = fuse.call @mtrans33[elem](%a) into reg : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %y = fuse.call @madd33[elem](%x, %x) into shared[36] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %y2 = fuse.call @madd33[elem](%y, %y) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    %z = fuse.call @mtrans33[row](%y2) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %z to %Z : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %x = fuse.call @mtrans33[elem](%a) into reg
// CHECK-NEXT: %y = fuse.call @madd33[elem](%x, %x) into shared[36]
// CHECK-NEXT: %y2 = fuse.call @madd33[elem](%y, %y) into shared[72]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %z = fuse.call @mtrans33[row](%y2) into shared[0]
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %z to %Z
