"""The op libraries installed as packages (`irfuse.library.entry_points`), for the library
interface: the program cache's keys name them (`api.program_cache.library_key`). Plain
Python: loads neither xDSL nor the op library."""

from irfuse.library.entry_points import installed_libraries

__all__ = ["installed_libraries"]
