// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// RUN: irfuse-opt %s -p 'fuse-promote-registers{inputs=true}' | filecheck %s
// A loaded value takes its first reader's words in registers: `item_1_2` reads the second word
// of %a's rows, so in registers each thread would hold that word alone. %a is also summed over
// the batch, and the reduction's tree takes every word of it from where it is: %a stays in
// shared memory, whole (in registers the first word was never loaded and the tree read
// uninitialized shared words: found by benchmarks/fuzz.py, seed 98018). %b, read whole by its
// one reader and summed, goes to registers.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%A: !kas.vector<2>, %B: !kas.vector<2>) -> (%S: !kas.vector<2>, %T: !kas.vector<2>, %X: !kas.scalar, %Y: !kas.vector<2>) {
    %a = fuse.load %A into shared[0] : !kas.vector<2>
    %b = fuse.load %B into shared[16] : !kas.vector<2>
    fuse.barrier
    %x = fuse.call @item_1_2[elem](%a) into shared[32] : (!kas.vector<2>) -> !kas.scalar
    %y = fuse.call @vadd2[elem](%b, %b) into shared[40] : (!kas.vector<2>, !kas.vector<2>) -> !kas.vector<2>
    fuse.barrier
    fuse.store %a to %S reduce sum : !kas.vector<2>
    fuse.store %b to %T reduce sum : !kas.vector<2>
    fuse.store %x to %X : !kas.scalar
    fuse.store %y to %Y : !kas.vector<2>
  }
}
// CHECK:      %a = fuse.load %A into shared[0] : !kas.vector<2>
// CHECK-NEXT: %b = fuse.load %B into reg : !kas.vector<2>
