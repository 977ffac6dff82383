// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// #fuse.ap attributes print and parse back; a start expression with unknown names is refused.
builtin.module attributes {aps = [#fuse.ap<"ty*9 + tx*3", 1, 1, 3>, #fuse.ap<"ty*9", 1, 3, 3, noreg>]} {
}
// CHECK: builtin.module attributes {aps = [#fuse.ap<"ty*9 + tx*3", 1, 1, 3>, #fuse.ap<"ty*9", 1, 3, 3, noreg>]} {

// -----
builtin.module attributes {ap = #fuse.ap<"ty*q", 1, 1, 3>} {
}
// CHECK: access-pattern start 'ty*q' uses 'q'; allowed: tx, ty, BX, BY
