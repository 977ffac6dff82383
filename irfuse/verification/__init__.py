"""Checking results: the float64 NumPy reference that evaluates a `kas` program (`reference`),
inputs made at random or read from files for it, and the comparison of a run's outputs with
it under the allowance its rounding earns (`verify`)."""
