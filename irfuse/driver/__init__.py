"""The driver: the one way from a program's source to what runs it. `front` reads a source
and gives its module (derivative lines applied), `compile` plans, lowers and builds it into
an artifact (a program of several stages where it works per node: `stages`), `options`
checks and defaults the options once, `library` is the op library with its implementation
check installed, `artifact` the compiled program with its IR.

Importing the package imports nothing: the modules that only need plain data
(`options`) load without xDSL, so the library interface imports them at no cost to a
process that runs cached programs."""
