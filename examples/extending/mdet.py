"""An irfuse library extension: a 3x3 determinant, defined once and implemented by hand.

Load it with `--library examples/extending/mdet.py` (irfuse and irfuse-opt),
or expose `register` through an `irfuse.library` entry point of a package.
"""

from irfuse.dialects.kas import MatrixType, ScalarType

# Cofactor expansion along the first row, in irfuse's index notation.
DEFINITION = (
    "d = A[0,0]*(A[1,1]*A[2,2] - A[1,2]*A[2,1])"
    " - A[0,1]*(A[1,0]*A[2,2] - A[1,2]*A[2,0])"
    " + A[0,2]*(A[1,0]*A[2,1] - A[1,1]*A[2,0])"
)

# KAS style: FUNC, APIN0 and APOUT are placeholders irfuse fills in (the access
# pattern's start for a value in shared memory, 0 for one in registers).
COFACTOR = """
__device__ __forceinline__ void FUNC(int tx, int ty, const real_t* __restrict__ A, real_t* d)
{
  const real_t* a = A + APIN0;
  const real_t c0 = a[4] * a[8] - a[5] * a[7];
  const real_t c1 = a[5] * a[6] - a[3] * a[8];
  const real_t c2 = a[3] * a[7] - a[4] * a[6];
  d[APOUT] = a[0] * c0 + a[1] * c1 + a[2] * c2;
}
"""


def register(library):
    m33 = MatrixType(3, 3)
    library.define("mdet33", [("A", m33)], ScalarType(), DEFINITION, "determinant of a 3x3 matrix")
    # One thread per element: it reads the whole matrix (ty*9, 9 words) and writes one word.
    library.implement("mdet33", "cofactor", bx=1, source=COFACTOR,
                      operand_aps=[("ty*9", 1, 1, 9)], result_ap=("ty", 1, 1, 1))
