// RUN: irfuse-opt %s -p fuse-promote-registers | filecheck %s
// A value read whole by one call and in part by another goes to registers where its readers run
// right after the call making it, one after another: %e (the P1 strain, sym of %h) is read on its
// diagonal by trace and whole by scale, the next two calls. %c is read whole by inv right after it
// is made, but on its diagonal by trace only after another call (smimul33, which does not read
// it): held in registers across that call, Neo-Hookean's F^T F made its kernel spill, so %c stays
// in shared memory.
builtin.module {
  fuse.kernel @k block(bx = 1, by = 8) (%H: !kas.matrix<3x3>, %S: !kas.scalar) -> (%T: !kas.scalar, %G: !kas.matrix<3x3>, %U: !kas.scalar, %V: !kas.matrix<3x3>, %W: !kas.matrix<3x3>) {
    %h = fuse.load %H into reg : !kas.matrix<3x3>
    %s = fuse.load %S into reg : !kas.scalar
    %e = fuse.call @sym_3x3[elem](%h) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @trace_3x3[elem](%e) into reg : (!kas.matrix<3x3>) -> !kas.scalar
    %g = fuse.call @scale_3x3_s[elem](%e, %s) into reg : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %c = fuse.call @mtmul_3x3_3x3[elem](%h, %h) into shared[72] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %ci = fuse.call @inv_3x3[elem](%c) into reg : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %i = fuse.call @smimul33[elem](%s) into reg : (!kas.scalar) -> !kas.matrix<3x3>
    %u = fuse.call @trace_3x3[elem](%c) into reg : (!kas.matrix<3x3>) -> !kas.scalar
    fuse.store %t to %T : !kas.scalar
    fuse.store %g to %G : !kas.matrix<3x3>
    fuse.store %u to %U : !kas.scalar
    fuse.store %ci to %V : !kas.matrix<3x3>
    fuse.store %i to %W : !kas.matrix<3x3>
  }
}
// CHECK:      %e = fuse.call @sym_3x3[elem](%h) into reg
// CHECK-NEXT: %t = fuse.call @trace_3x3[elem](%e) into reg
// CHECK-NEXT: %g = fuse.call @scale_3x3_s[elem](%e, %s) into reg
// CHECK-NEXT: %c = fuse.call @mtmul_3x3_3x3[elem](%h, %h) into shared[72]
