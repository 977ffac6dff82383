// RUN: irfuse-opt %s --split-input-file -p fuse-allocate-shared | filecheck %s
// The word size banks are counted in is the module's element type (kas.element_type):
// RUN: sed 's/^builtin.module {/builtin.module attributes {kas.element_type = f64} {/' %s | irfuse-opt --split-input-file -p fuse-allocate-shared | filecheck %s --check-prefix=F64
// RUN: irfuse-opt %s --split-input-file -p 'fuse-allocate-shared{pad-banks=false}' | filecheck %s --check-prefix=NOPAD
// RUN: sed 's/^builtin.module {/builtin.module attributes {kas.element_type = f16} {/' %s | not irfuse-opt --split-input-file -p fuse-allocate-shared 2>&1 | filecheck %s --check-prefix=BAD
// BAD: error: module attribute kas.element_type must be f32 or f64, got f16

// Element mapping of a 2x2 product, 32 elements per block: thread ty reads word ty*4 + k, so
// the 32 threads of a warp hit 8 banks (4-way conflicts); pitch 5 spreads them over 32 banks.
// Both values are padded, and each takes 32*5 = 160 words.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[elem](%a, %a) into shared[0] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK:      %a = fuse.load %A into shared[0, pitch 5]
// CHECK:      %c = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5]
// 8-byte words: 16 threads per phase over 16 double-width banks, also 4-way without padding.
// F64:        %a = fuse.load %A into shared[0, pitch 5]
// F64:        %c = fuse.call @mmul22[elem](%a, %a) into shared[160, pitch 5]
// NOPAD:      %a = fuse.load %A into shared[0] :
// NOPAD:      %c = fuse.call @mmul22[elem](%a, %a) into shared[128] :

// -----

// 3x3 matrices are 9 words apart, an odd stride: conflict free, so nothing is padded.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%A: !kas.matrix<3x3>) -> (%C: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %c = fuse.call @mmul33[elem](%a, %a) into shared[0] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into shared[0] :
// CHECK:      %c = fuse.call @mmul33[elem](%a, %a) into shared[288] :
// F64:        %a = fuse.load %A into shared[0] :
// NOPAD:      %a = fuse.load %A into shared[0] :

// -----

// The entry mapping of a 2x2 product (4 threads per element) already reads consecutive words
// across threads: padding would only add conflicts to the copies, so none is chosen. A pitch
// already in the input is recomputed, not kept.
builtin.module {
  fuse.kernel @k block(bx = 4, by = 32) (%A: !kas.matrix<2x2>) -> (%C: !kas.matrix<2x2>) {
    %a = fuse.load %A into shared[0, pitch 7] : !kas.matrix<2x2>
    fuse.barrier
    %c = fuse.call @mmul22[entry](%a, %a) into shared[0] : (!kas.matrix<2x2>, !kas.matrix<2x2>) -> !kas.matrix<2x2>
    fuse.barrier
    fuse.store %c to %C : !kas.matrix<2x2>
  }
}
// CHECK:      %a = fuse.load %A into shared[0] :
// CHECK:      %c = fuse.call @mmul22[entry](%a, %a) into shared[128] :
// NOPAD:      %a = fuse.load %A into shared[0] :
