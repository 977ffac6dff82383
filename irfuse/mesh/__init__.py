"""Meshes as arrays: a node array of coordinates and a connectivity (an element's node
numbers, one row per element), as gathers and scatters through a connectivity read them.

- `box_tetrahedra`: a cube of hexahedra split into tetrahedra, for tests and benchmarks, in a
  structured or a random numbering;
- `reorder`: node and element permutations that give a mesh locality (reverse
  Cuthill-McKee on the node graph, or a Morton curve through the node coordinates), and
  `renumber`, which applies them.

NumPy only; nothing of the compiler.
"""

from irfuse.mesh.generate import box_tetrahedra
from irfuse.mesh.order import check_connectivity, reorder, renumber

__all__ = ["box_tetrahedra", "check_connectivity", "reorder", "renumber"]
