"""What the compiler hands the runtime: the kernels' launch interface (`kernel_info`), the
host program as plain steps (`host_plan`), the arrays' layouts and element types
(`arrays`), and the artifact that holds them with the compiled binaries (`artifact`).
Nothing here imports xDSL: a saved plan runs without the compiler."""
