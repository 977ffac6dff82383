// RUN: irfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Malformed gathers, scatters, nodal values and gathering loads are rejected by the verifiers.

builtin.module {
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.vector<3>) nodal(X, r) {
    %e = kas.gather %X, %c : (!kas.vector<3>, !kas.index<4>) -> !kas.matrix<3x3>
    %r = kas.scatter %e, %c : (!kas.matrix<3x3>, !kas.index<4>) -> !kas.vector<3>
    kas.return %r : !kas.vector<3>
  }
}
// CHECK: kas.gather: through !kas.index<4>, a nodal !kas.vector<3> goes with an element value of shape 4x3, not !kas.matrix<3x3>

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.matrix<4x3>) {
    %e = kas.gather %X, %c : (!kas.vector<3>, !kas.index<4>) -> !kas.matrix<4x3>
    kas.return %e : !kas.matrix<4x3>
  }
}
// CHECK: kas.gather reads a nodal value (an input listed in nodal(...) or a nodal statement's result)

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.vector<3>) nodal(X) {
    %y = kas.call @vneg3(%X) : (!kas.vector<3>) -> !kas.vector<3>
    kas.return %y : !kas.vector<3>
  }
}
// CHECK: kas.program: output 'r' is a nodal value but not listed in nodal(...)

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.index<4>) nodal(X) {
    kas.return %c : !kas.index<4>
  }
}
// CHECK: kas.program: the connectivity 'c' is read by kas.return; only kas.gather and kas.scatter read connectivities

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.matrix<4x3>) nodal(X, r) {
    %e = kas.gather %X, %c : (!kas.vector<3>, !kas.index<4>) -> !kas.matrix<4x3>
    kas.return %e : !kas.matrix<4x3>
  }
}
// CHECK: kas.program: output 'r' is nodal but not a nodal value (a scatter's or a nodal statement's result)

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %y: !kas.vector<3>) -> (r : !kas.vector<3>) nodal(X, r) {
    %z = kas.call @vadd3(%X, %y) : (!kas.vector<3>, !kas.vector<3>) -> !kas.vector<3>
    kas.return %z : !kas.vector<3>
  }
}
// CHECK: kas.call @vadd3 reads nodal and per-element values; gather the nodal ones first

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>, %y: !kas.vector<3>) -> (r : !kas.vector<3>) nodal(X) {
    %l, %b = kas.loop 2 iter_args(%a = %y) -> (!kas.vector<3>, !kas.vector<3>) {
      %c = kas.call @vneg3(%X) : (!kas.vector<3>) -> !kas.vector<3>
      kas.yield %a, %c : !kas.vector<3>, !kas.vector<3>
    }
    kas.return %l : !kas.vector<3>
  }
}
// CHECK: kas.call @vneg3 reads a nodal value inside a loop: nodal statements stand at the program's top level

// -----
builtin.module {
  kas.program @p(%X: !kas.matrix<4x3>, %c: !kas.index<4>) -> (r : !kas.vector<3>) nodal(X, r) {
    %r = kas.scatter %X, %c : (!kas.matrix<4x3>, !kas.index<4>) -> !kas.vector<3>
    kas.return %r : !kas.vector<3>
  }
}
// CHECK: kas.scatter adds a per-element value, not a nodal or uniform one

// -----
builtin.module {
  kas.program @p(%X: !kas.vector<3>) -> (r : !kas.vector<3>) nodal(X, r) {
    kas.return %X : !kas.vector<3>
  }
}
// CHECK: kas.program: output 'r' returns the nodal input as it is

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%X: !kas.vector<3>, %c: !kas.index<4>) -> (%o: !kas.matrix<4x3>) {
    %e = fuse.load %X gather %c into uniform : !kas.matrix<4x3>
    fuse.store %e to %o : !kas.matrix<4x3>
  }
}
// CHECK: fuse.load gather gives one value per element: it cannot go into the uniform place

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) layout(soa) (%X: !kas.vector<3>, %c: !kas.index<4>) -> (%o: !kas.matrix<4x3>) {
    %e = fuse.load %X gather %c into shared[0] : !kas.matrix<4x3>
    fuse.store %e to %o : !kas.matrix<4x3>
  }
}
// CHECK: fuse.load gather: a kernel with gathers takes arrays of structures

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%X: !kas.vector<3>, %c: !kas.index<4>) -> (%o: !kas.matrix<4x3>) {
    %e = fuse.load %X gather %c into shared[0] : !kas.matrix<4x3>
    fuse.store %e to %o reduce sum scatter : !kas.matrix<4x3>
  }
}
// CHECK: fuse.store is a reduction's partial or a scatter's rows, not both

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%s: !kas.scalar) -> (%o: !kas.scalar) {
    %e = fuse.load %s into shared[0] : !kas.scalar
    fuse.store %e to %o scatter : !kas.scalar
  }
}
// CHECK: fuse.store scatter writes each element's rows, but !kas.scalar has none

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 64) (%X: !kas.vector<3>, %c: !kas.index<4>) -> (%o: !kas.matrix<4x3>) {
    %e = fuse.load %X gather %c into shared[0] : !kas.matrix<4x3>
    fuse.store %e to %o scatter : !kas.matrix<4x3>
  }
  kas.program @p(%X: !kas.vector<3>, %c: !kas.index<4>) -> (r : !kas.vector<3>, e : !kas.matrix<4x3>) nodal(X, r) {
    %e = fuse.launch @k(%X, %c) : (!kas.vector<3>, !kas.index<4>) -> !kas.matrix<4x3>
    %r = kas.scatter %e, %c : (!kas.matrix<4x3>, !kas.index<4>) -> !kas.vector<3>
    kas.return %r, %e : !kas.vector<3>, !kas.matrix<4x3>
  }
}
// CHECK: fuse.launch of @k: result 0 holds a scatter's rows summed in groups, which only kas.scatter reads, not kas.return

// -----
builtin.module {
  fuse.kernel @k block(bx = 1, by = 32) (%X: !kas.vector<3>, %c: !kas.index<4>) -> (%o: !kas.matrix<4x3>) {
    %e = fuse.load %X gather %c into shared[0] : !kas.matrix<4x3>
    fuse.store %e to %o scatter : !kas.matrix<4x3>
  }
}
// CHECK: fuse.store scatter of 4 rows an element in a kernel of 32 elements a block: the rows are summed in groups of 64 elements, which its blocks must hold whole
