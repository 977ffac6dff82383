// Places and register use are enumerations: a space or a keyword outside them does not parse.
// RUN: sed -n '/^\/\/ PLACE$/,/^}/p' %s | not irfuse-opt 2>&1 | filecheck %s --check-prefix=PLACE
// RUN: sed -n '/^\/\/ AP$/,/^}/p' %s | not irfuse-opt 2>&1 | filecheck %s --check-prefix=AP
// RUN: sed -n '/^\/\/ GOOD$/,/^}/p' %s | irfuse-opt | filecheck %s --check-prefix=GOOD

// PLACE
builtin.module attributes {p = #fuse.place<global[0]>} {
}
// PLACE: Expected 'shared'

// AP
builtin.module attributes {ap = #fuse.ap<"ty*9", 1, 1, 9, maybe>} {
}
// AP: Expected 'noreg'

// GOOD
builtin.module attributes {ap = #fuse.ap<"ty*9", 1, 1, 9, noreg>, p = #fuse.place<reg>, q = #fuse.place<shared[4, pitch 5]>} {
}
// GOOD: #fuse.ap<"ty*9", 1, 1, 9, noreg>
// GOOD-SAME: #fuse.place<reg>
// GOOD-SAME: #fuse.place<shared[4, pitch 5]>
