"""Archives of inputs for `irfuse run --inputs` as a damaged or crafted file gives them (run from
anywhere; writes into the folder given, default /tmp):

    python make_files.py /tmp && for f in obj missing corrupt huge bomb raw; do
        irfuse run one.kas --backend cpu --inputs /tmp/in_$f.npz; done
"""
import io
import os
import sys
import zipfile

import numpy as np

where = sys.argv[1] if len(sys.argv) > 1 else "/tmp"


def header(shape) -> bytes:
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (63 - len(text) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


np.savez(os.path.join(where, "in_obj.npz"), x=np.array([object(), 1], dtype=object))
np.savez(os.path.join(where, "in_missing.npz"), y=np.ones((4, 3), np.float32))
with open(os.path.join(where, "in_corrupt.npz"), "wb") as f:
    f.write(b"PK\x03\x04garbage")
with zipfile.ZipFile(os.path.join(where, "in_huge.npz"), "w") as z:  # 1.2 TB claimed in 16 bytes
    z.writestr("A.npy", header((100000000000, 3)) + bytes(16))
with zipfile.ZipFile(os.path.join(where, "in_bomb.npz"), "w", compression=zipfile.ZIP_DEFLATED) as z:
    with z.open("A.npy", "w", force_zip64=True) as f:  # 2.16 GB of zeros in 2 MB, all there
        f.write(header((60000000, 3, 3)))
        chunk = bytes(1 << 24)
        for _ in range(60000000 * 36 // (1 << 24) + 1):
            f.write(chunk)
with zipfile.ZipFile(os.path.join(where, "in_raw.npz"), "w") as z:
    z.writestr("A", b"not an array")
