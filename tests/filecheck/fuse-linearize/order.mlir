// RUN: irfuse-opt %s -p fuse-linearize | filecheck %s
// A value larger than its inputs (vouter3: 9 words from 3) is best made late. In the given
// order (x, y1, y2, o) x is alive while the 3x3 chain runs: peak 30 words per element;
// using x at once (o right after x) gives peak 24. Each store follows its value's producer;
// barriers go back after the loads, every call and every store (the old ones belonged to the old order).
builtin.module {
  fuse.kernel @k block(bx = 1, by = 4) (%V: !kas.vector<3>, %B: !kas.matrix<3x3>, %C: !kas.vector<3>) -> (%Y: !kas.matrix<3x3>, %O: !kas.vector<3>) {
    %v = fuse.load %V into shared[0] : !kas.vector<3>
    %b = fuse.load %B into shared[12] : !kas.matrix<3x3>
    %c = fuse.load %C into shared[48] : !kas.vector<3>
    fuse.barrier
    %x = fuse.call @vouter3[elem](%v, %v) into shared[60] : (!kas.vector<3>, !kas.vector<3>) -> !kas.matrix<3x3>
    %y1 = fuse.call @madd33[elem](%b, %b) into shared[96] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %y2 = fuse.call @madd33[elem](%y1, %y1) into shared[132] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %o = fuse.call @mvmul33[elem](%x, %c) into shared[168] : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.barrier
    fuse.store %y2 to %Y : !kas.matrix<3x3>
    fuse.store %o to %O : !kas.vector<3>
  }
}
// CHECK:      %c = fuse.load %C
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %x = fuse.call @vouter3[elem](%v, %v)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %o = fuse.call @mvmul33[elem](%x, %c)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %o to %O
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %y1 = fuse.call @madd33[elem](%b, %b)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: %y2 = fuse.call @madd33[elem](%y1, %y1)
// CHECK-NEXT: fuse.barrier
// CHECK-NEXT: fuse.store %y2 to %Y
// CHECK-NEXT: }
