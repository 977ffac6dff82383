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

from irfuse.mesh.connectivity import Connectivity
from irfuse.mesh.generate import box_tetrahedra
from irfuse.mesh.hexahedra import box_hexahedra, gauss_legendre, gauss_lobatto
from irfuse.mesh.order import check_connectivity, reorder, renumber
from irfuse.mesh.partition import Part, partition
from irfuse.mesh.scatter import inverse_connectivity, scatter_add

__all__ = ["Connectivity", "Part", "box_hexahedra", "box_tetrahedra", "check_connectivity", "gauss_legendre",
           "gauss_lobatto", "inverse_connectivity", "partition", "reorder", "renumber", "scatter_add"]
