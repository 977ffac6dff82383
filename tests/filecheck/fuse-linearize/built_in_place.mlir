// RUN: irfuse-opt %s -p fuse-linearize | filecheck %s
// %t is built in place (analysis.placements: a transpose, which only moves words, of a register
// value, read by its store alone): its staging is live from its part %p on. So the stored %s,
// which does not need %p, is made and stored before %p with what it needs (%q), where program
// order would stage it while %t's words are taken (J2's consistent tangent: its stress and ep).
builtin.module {
  fuse.kernel @stored_first block(bx = 1, by = 32) (%A: !kas.matrix<3x3>) -> (%T: !kas.matrix<3x3>, %S: !kas.matrix<3x3>) {
    %a = fuse.load %A into reg : !kas.matrix<3x3>
    %p = fuse.call @mmul33[elem](%a, %a) into reg : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %t = fuse.call @mtrans33[elem](%p) into shared[0] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %t to %T : !kas.matrix<3x3>
    %q = fuse.call @mtrans33[elem](%a) into reg : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %s = fuse.call @mmul33[elem](%q, %a) into shared[288] : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.store %s to %S : !kas.matrix<3x3>
  }
}
// CHECK:      %a = fuse.load %A into reg
// CHECK:      %q = fuse.call @mtrans33[elem](%a) into reg
// CHECK:      %s = fuse.call @mmul33[elem](%q, %a) into shared[288]
// CHECK:      fuse.store %s to %S
// CHECK:      %p = fuse.call @mmul33[elem](%a, %a) into reg
// CHECK:      %t = fuse.call @mtrans33[elem](%p) into shared[0]
// CHECK:      fuse.store %t to %T
