// RUN: irfuse-opt %s --split-input-file -p test-print-staged-loads 2>&1 >/dev/null | filecheck %s
// RUN: sed 's/^builtin.module attributes {kas.layout = "soa"} {/builtin.module attributes {kas.layout = "soa", kas.element_type = f64} {/' %s | irfuse-opt --split-input-file -p test-print-staged-loads 2>&1 >/dev/null | filecheck %s --check-prefix=F64
// The register loads a structure-of-arrays kernel stages through shared memory in 16-byte runs
// on the GPU (`staged_run_loads`): its leading loads of values in registers, a run of `by`
// words per word of the value; loads into shared memory are not among them (they are block
// copies already). None in an array-of-structures kernel, in one whose runs are not whole
// 16-byte pieces (by = 2 in float32; whole in float64), or with several threads an element.
builtin.module attributes {kas.layout = "soa"} {
  fuse.kernel @both block(bx = 1, by = 128) layout(soa) (%A: !kas.matrix<3x3>, %c: !kas.vector<3>) -> (%w: !kas.vector<3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %v = fuse.load %c into reg : !kas.vector<3>
    %o = fuse.call @mvmul33[elem](%a, %v) into reg : (!kas.matrix<3x3>, !kas.vector<3>) -> !kas.vector<3>
    fuse.store %o to %w : !kas.vector<3>
  }
  fuse.kernel @one_shared block(bx = 1, by = 64) layout(soa) (%A: !kas.matrix<3x3>, %B: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %b = fuse.load %B into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %o = fuse.call @madd33[elem](%a, %b) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %o to %O : !kas.matrix<3x3>
  }
  fuse.kernel @short_runs block(bx = 1, by = 2) layout(soa) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %o = fuse.call @madd33[elem](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %o to %O : !kas.matrix<3x3>
  }
  fuse.kernel @rows block(bx = 3, by = 128) layout(soa) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %o = fuse.call @madd33[row](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}

// -----

builtin.module {
  fuse.kernel @aos block(bx = 1, by = 128) (%A: !kas.matrix<3x3>) -> (%O: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %o = fuse.call @madd33[elem](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %o to %O : !kas.matrix<3x3>
  }
}
// CHECK:      staged loads in @both: 2, 6144 bytes a block
// CHECK-NEXT:   %a: 9 runs of 128 words
// CHECK-NEXT:   %v: 3 runs of 128 words
// CHECK-NEXT: staged loads in @one_shared: 1, 2304 bytes a block
// CHECK-NEXT:   %a: 9 runs of 64 words
// CHECK-NEXT: staged loads in @short_runs: none
// CHECK-NEXT: staged loads in @rows: none
// CHECK-NEXT: staged loads in @aos: none
// F64:        staged loads in @both: 2, 12288 bytes a block
// F64:        staged loads in @short_runs: 1, 144 bytes a block
// F64-NEXT:     %a: 9 runs of 2 words
// F64-NEXT:   staged loads in @rows: none
