// RUN: irfuse-opt %examples/transform44.kas -p 'kas-dce,fuse-partition,fuse-remap-threads,fuse-promote-registers{inputs=false outputs=false},fuse-linearize,fuse-allocate-shared' | filecheck %s
// RUN: irfuse-opt %examples/transform44.kas -p 'kas-dce,fuse-partition,fuse-remap-threads,fuse-promote-registers{inputs=false outputs=false},fuse-linearize,fuse-allocate-shared{pad-banks=false}' | filecheck %s --check-prefix=NOPAD
// Through the default pipeline with every loaded and stored value staged (`inputs=false
// outputs=false`: by default the vector p's 16-byte rows are loaded into registers and q's
// written from them), the example's shared 4x4 matrices get
// pitch 17 and its vectors pitch 5 (element mapping: 16- and 4-word strides conflict on
// banks); the register value is untouched. Without padding the same values are packed.
// CHECK:      %A_1 = fuse.load %A into shared[{{[0-9]+}}, pitch 17] : !kas.matrix<4x4>
// CHECK-NEXT: %B_1 = fuse.load %B into shared[{{[0-9]+}}, pitch 17] : !kas.matrix<4x4>
// CHECK-NEXT: %p_1 = fuse.load %p into shared[{{[0-9]+}}, pitch 5] : !kas.vector<4>
// CHECK:      %C = fuse.call @mmul44[elem](%A_1, %B_1) into reg
// CHECK:      %D_1 = fuse.call @mmul44[elem](%C, %C) into shared[{{[0-9]+}}, pitch 17]
// CHECK:      %q_1 = fuse.call @mvmul44[elem](%D_1, %p_1) into shared[{{[0-9]+}}, pitch 5]
// NOPAD:      %A_1 = fuse.load %A into shared[{{[0-9]+}}] : !kas.matrix<4x4>
// NOPAD-NOT:  pitch
