// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// A table of literal numbers (a uniform input fixed when compiling, `constants=`): it reads back
// as printed, every number exactly; a count other than its type's words, a number that is not
// finite and an index type are refused by the op's verifier.

builtin.module {
  kas.program @p(%A: !kas.vector<2>) -> (t : !kas.vector<2>) {
    %B = kas.table [0.12345678901234566, -2.5e-3] : !kas.vector<2>
    %t = kas.call @vadd2(%A, %B) : (!kas.vector<2>, !kas.vector<2>) -> !kas.vector<2>
    kas.return %t : !kas.vector<2>
  }
}
// CHECK:      %B = kas.table [0.12345678901234566, -0.0025] : !kas.vector<2>
// CHECK-NEXT: %t = kas.call @vadd2(%A, %B)

// -----
builtin.module {
  kas.program @p(%A: !kas.vector<2>) -> (t : !kas.vector<2>) {
    %B = kas.table [1.0, 2.0, 3.0] : !kas.vector<2>
    %t = kas.call @vadd2(%A, %B) : (!kas.vector<2>, !kas.vector<2>) -> !kas.vector<2>
    kas.return %t : !kas.vector<2>
  }
}
// CHECK: kas.table of a !kas.vector<2> holds 2 numbers, not 3

// -----
builtin.module {
  kas.program @p(%A: !kas.vector<2>) -> (t : !kas.vector<2>) {
    %B = "kas.table"() <{values = [1.0 : f64, 0x7FF0000000000000 : f64]}> : () -> !kas.vector<2>
    %t = kas.call @vadd2(%A, %B) : (!kas.vector<2>, !kas.vector<2>) -> !kas.vector<2>
    kas.return %t : !kas.vector<2>
  }
}
// CHECK: kas.table's numbers must be finite, got inf
