"""Meshes as arrays: a node array of coordinates and a connectivity (an element's node
numbers, one row per element), as gathers and scatters through a connectivity read them.

- `box_tetrahedra`: a cube of hexahedra split into tetrahedra, for tests and benchmarks, in a
  structured or a random numbering; `box_hexahedra`: a cube of hexahedra of order p, their
  nodes at Gauss-Lobatto points (`gauss_lobatto`, `gauss_legendre`: the 1-D rules);
- `reorder`: node and element permutations that give a mesh locality (reverse
  Cuthill-McKee on the node graph, or a Morton curve through the node coordinates, also on
  the GPU), and `renumber`, which applies them;
- `Connectivity`: a connectivity checked and inverted once, for every call that passes it
  (on the GPU where it is given there: `on_gpu`);
- `inverse_connectivity` and `scatter_add`: the scatter order (groups of consecutive
  elements whose rows of a node are summed into partials, each node's partials in group
  order), and the nodal sum of per-element values added in that order (the same bits on
  every run);
- `partition`: parts that own nodes and hold every element around them, whose sums at their
  own nodes are the whole mesh's, bit for bit.

NumPy, and PyTorch for arrays on a GPU (`on_gpu`); nothing of the compiler.
"""

# name -> its module: imported on first use, so that the runtime, which needs the scatter
# order alone, loads a program without the rest (`irfuse.compile` of a cached program). No
# module is named as a name it exports: importing `irfuse.mesh.X` sets the package's
# attribute X to the module, which would hide a function X from then on.
_NAMES = {"Connectivity": "connectivity", "box_tetrahedra": "generate", "box_hexahedra": "hexahedra",
          "gauss_legendre": "hexahedra", "gauss_lobatto": "hexahedra", "check_connectivity": "order",
          "reorder": "order", "renumber": "order", "Part": "partitions", "partition": "partitions",
          "inverse_connectivity": "scatter", "scatter_add": "scatter"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    import importlib

    if name not in _NAMES:
        raise AttributeError(f"module 'irfuse.mesh' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"irfuse.mesh.{_NAMES[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
