"""Python functions the tracer must refuse; each error's line carries a `# refused:` marker."""

import numpy as np

import irfuse
from irfuse import Matrix, Scalar, Vector


def branch(A: Matrix[3, 3], s: Scalar):
    B = A + A
    if s:  # refused: a condition is a comparison (a > b) or a mask
        B = A @ A
    return B


def not_an_op(A: Matrix[3, 3]):
    B = print(A)  # refused: 'print' is not an op
    return B


def while_loop(A: Matrix[3, 3]):
    while True:  # refused: a 'while' statement cannot be traced
        A = A @ A
    return A


def loop_counter(A: Matrix[3, 3]):
    for i in range(3):
        A = A @ A
        B = i  # noqa: F841  # refused: the loop counter 'i' is only read as an array's index (x[i])
    return A


def data_dependent_trip_count(A: Matrix[3, 3], k: Scalar):
    for _ in range(k):  # refused: the trip count must be a whole number
        A = A @ A
    return A


def reduction_of_a_uniform_value(A: Matrix[3, 3], C: irfuse.Uniform[Matrix[3, 3]]):
    T = irfuse.sum(C)  # refused: irfuse.sum reduces a per-element value over the batch, not 'C', which is uniform
    return A, T


def reduction_of_two_values(A: Matrix[3, 3]):
    T = irfuse.max(A, A)  # refused: irfuse.max takes one value (reduced over the batch), got 2
    return T


def variable_changing_what_it_holds(A: Matrix[3, 3]):
    T = A * 2
    T = irfuse.min(A)  # refused: 'T' held one value per element and would hold one value for the whole batch
    return T


def reduction_in_a_loop(A: Matrix[3, 3]):
    for _ in range(2):
        T = irfuse.sum(A)  # refused: 'sum' cannot be inside a loop
    return T


def no_annotation(A, B: Matrix[3, 3]):  # refused: parameter 'A' needs an irfuse type annotation
    return B


def wrong_shapes(A: Matrix[3, 3], v: Vector[4]):
    w = A @ v  # refused: 'mvmul' does not take matrix3x3, vector4
    return w


def wrong_operands(A: Matrix[3, 3], v: Vector[3]):
    w = irfuse.ops.mmul33(A, v)  # refused: mmul33(matrix3x3, matrix3x3) -> matrix3x3 cannot take (matrix3x3, vector3)
    return w


def type_change(A: Matrix[3, 3], v: Vector[3]):
    w = A @ v
    w = A @ A  # refused: 'w' was a vector3 and would become a matrix3x3
    return w


def undefined(A: Matrix[3, 3]):
    B = A @ C  # noqa: F821  # refused: 'C' is not a value of the program
    return B


def return_in_a_loop(A: Matrix[3, 3]):
    for _ in range(2):
        return A  # refused: a 'return' inside a loop cannot be traced
    return A


def returns_of_different_counts(A: Matrix[3, 3], s: Scalar):
    if s > 0:
        return A, A
    return A  # refused: this 'return' gives 1 value where the one at line


def returns_of_different_types(A: Matrix[3, 3], s: Scalar):
    if s > 0:
        return A
    return s  # refused: this value is a scalar per element where another 'return' gives a matrix3x3


def returns_per_element_and_for_the_batch(s: Scalar):
    if s > 0:
        return irfuse.sum(s)
    return s  # refused: where another 'return' gives a scalar for the whole batch


def a_path_without_return(A: Matrix[3, 3], s: Scalar):
    if s > 0:
        return A
    B = A @ A  # noqa: F841  # refused: the program ends here without a 'return'


def a_batch_sum_after_returns_on_some_paths(A: Matrix[3, 3], s: Scalar, t: Scalar):
    if s > 0:
        A = A @ A
        if t > 0:
            return A
    n = irfuse.sum(s)  # refused: this combines the batch's elements after the 'if' at line
    return A * n


def a_bare_return_in_a_branch(A: Matrix[3, 3], s: Scalar):
    if s > 0:
        return  # refused: a 'return' gives the program's values (a bare 'return' gives none)
    return A


def unused_input(A: Matrix[3, 3], B: Matrix[3, 3]):  # warned: input 'B' is never used
    C = A @ A
    return C


def gather_of_element_value(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4], w: Vector[3]):
    Xe = irfuse.gather(w, conn)  # refused: irfuse.gather reads a nodal value, but 'w' holds one value per element
    r = irfuse.scatter(Xe, conn)
    return r


def scatter_of_nodal_value(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4]):
    r = irfuse.scatter(X, conn)  # refused: irfuse.scatter adds values per element into the nodes, but 'X'
    return r


def nodal_and_element_values_in_one_op(X: irfuse.Nodal[Vector[3]], y: Vector[3], conn: irfuse.Index[4]):
    Y = X + y  # refused: 'y' holds one value per element, but 'X' one per node
    return Y


def gather_of_an_entry(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4]):
    qe = irfuse.gather(X[1], conn)  # refused: irfuse.gather moves a whole value, not the entry 'X[1]'
    return irfuse.scatter(qe, conn)


def entry_of_a_nodal_value_with_an_element_value(X: irfuse.Nodal[Vector[3]], y: Scalar, conn: irfuse.Index[4]):
    z = X[1] + y  # refused: 'y' holds one value per element, but 'X' one per node
    return z


def nodal_statement_in_a_loop(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4], s: irfuse.Uniform[Scalar]):
    Xe = irfuse.gather(X, conn)
    r = irfuse.scatter(Xe, conn)
    for _ in range(2):
        r = r * s  # refused: a statement on nodal values stands at the program's top level
    return r


def scatter_of_the_wrong_rows(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4], f: Matrix[3, 3]):
    r = irfuse.scatter(f, conn)  # refused: irfuse.scatter through an irfuse.Index[4] adds a value of 4 rows
    return r


def gather_without_a_connectivity(X: irfuse.Nodal[Vector[3]], conn: Vector[4]):
    Xe = irfuse.gather(X, conn)  # refused: the second operand of irfuse.gather is a connectivity
    return Xe


def scatter_in_a_loop(X: irfuse.Nodal[Vector[3]], conn: irfuse.Index[4]):
    Xe = irfuse.gather(X, conn)
    for _ in range(2):
        Xe = Xe + Xe
        r = irfuse.scatter(Xe, conn)  # refused: 'scatter' is a statement of the program's top level
    return r


def entry_along_more_axes_than_the_value_has(A: Matrix[3, 3]):
    return A[0, 1, 2]  # refused: 'A[0, 1, 2]' takes 3 indices, but 'A' has 2 axes


def entry_past_an_axis(A: Matrix[3, 2]):
    return A[2, 2]  # refused: 'A[2, 2]': index 2 is past the 2 entries of 'A' along axis 1


def slice_assigned_a_value_of_another_shape(A: Matrix[3, 3], v: Vector[2]):
    A[:, 0] = v  # refused: 'A[:, 0]' holds vector3 values; this value is a vector2
    return A


def slice_of_an_entry_assigned(A: Matrix[3, 3], v: Vector[2]):
    A[0][0:2] = v  # refused: a slice is assigned in one subscript of a value by its name (A[:, 0] = v)
    return A


def slice_of_nothing(v: Vector[3]):
    return v[2:1]  # refused: 'v[2:1]' takes no entry of the 3 along axis 0


def slice_by_a_value(A: Matrix[3, 3], s: Scalar):
    r = A[s:, 0]  # refused: a slice's bounds and step are whole numbers known when the program is compiled
    return r


def slice_with_a_counter_beside_it(A: Matrix[3, 3]):
    for q in range(2):
        r = A[q, :]  # noqa: F841  # refused: beside a slice, an index is a whole number
    return A


def string_returned(A: Matrix[3, 3]):
    B = A @ A  # noqa: F841 -- (the string spells it: returned as B before)
    return "B"  # refused: a string is only the first operand of 'contract'


def string_operand_of_an_infix_form(A: Matrix[3, 3]):
    B = A * "2.0"  # refused: a string is only the first operand of 'contract'
    return B


def membership_test(s: Scalar):
    m = s in s  # refused: a comparison compares values with < <= > >= == !=, not 'in'
    return m


def identity_test_in_a_condition(A: Matrix[3, 3], s: Scalar):
    B = A + A
    if s is s:  # refused: a condition compares values with < <= > >= == !=, not 'is'
        B = A @ A
    return B


def number_past_float64(A: Matrix[3, 3]):
    B = A * 1e400  # refused: this number is too large (beyond float64)
    return B


def annotation_and_value_disagree(A: Matrix[3, 3]):
    B: Scalar = A + A  # refused: 'B' was a scalar and would become a matrix3x3
    return B


def name_not_in_ascii(A: Matrix[3, 3]):
    Ä = A + A  # refused: 'Ä': a program's names are ASCII letters, digits and '_'
    return Ä


def parameter_name_not_in_ascii(A: Matrix[3, 3],
                                σ: Scalar):  # refused: 'σ': a program's names are ASCII letters
    B = A * σ
    return B


def builtin_max_of_one_value(s: Scalar):
    m = max(s)  # refused: max(a, b, ...) is the largest of its values, entry by entry (got 1); irfuse.max(x)
    return m


def conditional_expression_on_a_scalar(s: Scalar, t: Scalar):
    y = s if t else s * 2.0  # refused: a conditional expression's test is a comparison (a > b) or a mask
    return y


def entry_before_the_first(v: Vector[3]):
    y = v[-4]  # refused: 'v[-4]' reads before the first of its 3 entries
    return y


WEIGHTS = [0.5, 0.25]
NOT_A_NUMBER = float("nan")


def module_list_read_as_a_value(s: Scalar):
    y = s * WEIGHTS  # refused: 'WEIGHTS' is a list of the function's module, not a number or a value of the program
    return y


def module_nan_read_as_a_number(s: Scalar):
    y = s * NOT_A_NUMBER  # refused: 'NOT_A_NUMBER' is NaN: a program's numbers are finite
    return y


def module_number_assigned_in_the_program(s: Scalar):
    y = s * WEIGHT  # noqa: F823  # refused: 'WEIGHT' is not a value of the program
    WEIGHT = y + s
    return WEIGHT


WEIGHT = 0.5


def indexed_loop_not_from_zero(X: irfuse.Tensor[4, 2, 2], w: Vector[4]):
    s = w[0] * 0.0
    for q in range(1, 4):  # refused: an indexed loop counts from 0 by 1 (for q in range(3))
        s = s + w[q]
    return s


def loop_of_too_many_trips(s: Scalar):
    y = s
    for _ in range(-5, 1_000_000):  # refused: loop trip count 1000005 is out of range 0..1000000
        y = y * s
    return y


def loop_of_step_zero(s: Scalar):
    y = s
    for _ in range(0, 4, 0):  # refused: range()'s step is a whole number other than 0
        y = y * s
    return y


def masks_ordered(s: Scalar, t: Scalar):
    m = (s > 0) < (t > 0)  # refused: '<' of mask and mask: masks are compared with each other by == and != only
    return irfuse.where(m, s, t)


def mask_compared_with_a_number(s: Scalar):
    m = (s > 0) == 1  # refused: '==' of mask and scalar: masks are compared with each other by == and != only
    return irfuse.where(m, s, s * 2)


def bitwise_and_of_numbers(s: Scalar, t: Scalar):
    u = s & t  # refused: '&' is the logic of masks (m = a > b; m & n, m | n, m ^ n, ~m), not of scalar and scalar
    return u


def inverted_number(s: Scalar):
    u = ~s  # refused: '~' is the logic of masks
    return u


def chain_with_a_vector(s: Scalar, v: Vector[3]):
    m = s < v < s  # refused: 'lt' does not take scalar, vector3
    return irfuse.where(m, s, s * 2)


def tuple_from_one_value(s: Scalar, t: Scalar):
    a, b = s + t  # refused: a tuple of 2 targets takes a tuple of as many values (a, b = x, y)
    return a, b


def tuple_of_other_length(s: Scalar, t: Scalar):
    a, b = s, t, s  # refused: 2 targets take 2 values, got 3
    return a, b


def nested_tuple_target(s: Scalar, t: Scalar):
    (a, b), c = (s, t), s  # refused: a tuple assigns names or arrays' entries
    return a, b, c


def starred_tuple_target(s: Scalar, t: Scalar):
    *a, b = s, t  # refused: a tuple assigns names or arrays' entries
    return a, b


def remainder_of_other_shapes(v: Vector[3], A: Matrix[3, 3]):
    r = v % A  # refused: no op of the library computes '%' of vector3 and matrix3x3
    return r


def operand_by_a_name_the_op_has_not(A: Matrix[3, 3]):
    d = irfuse.ops.det(M=A)  # refused: 'det' has no operand 'M': its operands are A
    return d


def operand_given_twice(A: Matrix[3, 3]):
    d = irfuse.ops.det(A, A=A)  # refused: operand 'A' of 'det' is given twice
    return d


def operand_not_given(A: Matrix[3, 3]):
    d = irfuse.ops.mmul(A=A)  # refused: 'mmul' takes 2 operands (A, B); 'B' is not given
    return d


def contraction_by_name(A: Matrix[3, 3]):
    d = irfuse.ops.contract("ij->", A=A)  # refused: 'contract' takes its operands by position
    return d


def where_by_name(A: Matrix[3, 3]):
    d = irfuse.where(A > 0, x=A, y=A)  # refused: 'irfuse.where' takes its operands by position
    return d


def numpy_function_with_a_keyword(v: Vector[3]):
    w = np.clip(v, 0.0, 1.0, out=v)  # refused: 'np.clip' takes its operands by position
    return w


def numpy_function_of_other_arity(v: Vector[3]):
    w = np.sin(v, v)  # refused: np.sin takes 1 value here, got 2
    return w


def numpy_function_not_taken(v: Vector[3]):
    w = np.cumsum(v)  # refused: 'np.cumsum' is not an op
    return w


def product_of_other_shapes(v: Vector[3], A: Matrix[3, 3]):
    w = v * A  # refused: no op of the library computes '*' of vector3 and matrix3x3
    return w


def identity_of_a_size_the_library_has_not(A: Matrix[3, 3]):
    B = A - np.eye(7)  # refused: np.eye(n) takes a whole number n from 2 to 6
    return B


def stack_of_no_list(A: Matrix[3, 3]):
    B = np.stack(A)  # refused: np.stack takes the values it stacks written out as a list
    return B


def array_of_nothing(A: Matrix[3, 3]):
    B = A @ np.array([])  # refused: np.array stacks values written out, at least one
    return B


def method_with_operands_it_has_not(A: Matrix[3, 3]):
    t = A.trace(1)  # refused: '.trace()' takes no values here (NumPy's np.trace of the value), got 1
    return t


def subscript_of_a_slice_past_its_axes(A: Matrix[3, 3]):
    return A[:, 1][0, 1]  # refused: 'A[:, 1][0, 1]' takes 2 indices, but 'A[:, 1]' has 1 axes


def max_of_values_unpacked(s: Scalar, t: Scalar):
    m = max(*[s, t])  # refused: max's values are written out (no *args)
    return m


def scalar_left_of_a_matrix_product(A: Matrix[3, 3], s: Scalar):
    B = s @ A  # refused: no op of the library computes '@' of scalar and matrix3x3
    return B


def zeros_of_a_type(s: Scalar):
    v = np.zeros(3, np.float32)  # refused: np.zeros takes its shape alone here
    return v


def zeros_of_no_entries(s: Scalar):
    v = np.zeros((3, 0))  # refused: np.zeros's shape is whole numbers of at least 1
    return v


def linear_solve(A: Matrix[3, 3], b: Vector[3]):
    x = np.linalg.solve(A, b)  # refused: 'np.linalg.solve' is not taken: write np.linalg.inv(A) @ b
    return x


def diagonal_of_a_scalar(s: Scalar):
    d = np.diag(s)  # refused: np.diag takes a matrix (its diagonal) or a vector (the matrix of that diagonal)
    return d


def number_per_element_without_an_input_of_numbers_per_element(X: irfuse.Nodal[Scalar], conn: irfuse.Index[4]):
    Xe = irfuse.gather(X, conn)
    acc = 0.0  # refused: 'acc' holds one value per element and is given a number here, but the program has no input
    acc = acc + Xe[0]
    return acc
