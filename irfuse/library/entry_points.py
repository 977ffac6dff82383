"""The op libraries installed as packages: the `irfuse.library` entry points, which the
default library loads (`catalogue.default_library`) and the program cache's keys name
(`api.program_cache.library_key`).

Read through `importlib.metadata` only where some installed distribution may declare the
group: importing it and reading every distribution's metadata takes 20-45 ms, most of a cached
program's load in a fresh process and a tenth of a small program's cold compile, where
reading the distributions' `entry_points.txt` files for the group's name takes about 2."""

from __future__ import annotations

import os
import sys

GROUP = "irfuse.library"


def installed_libraries() -> list:
    """The entry points of the group (`importlib.metadata.EntryPoint`s), none where no
    distribution declares it (`declared`)."""
    if not declared():
        return []
    from importlib.metadata import entry_points

    return list(entry_points(group=GROUP))


def declared() -> bool:
    """Whether an installed distribution may declare the group: the `entry_points.txt` of
    every distribution in a folder on `sys.path` read for its name. True also wherever
    `importlib.metadata` may find distributions this cannot see (a file on `sys.path`, a zip;
    a finder of distributions other than the standard one), so that it is asked then."""
    if any(hasattr(finder, "find_distributions") and not _reads_sys_path(finder) for finder in sys.meta_path):
        return True
    for entry in sys.path:
        try:
            listing = os.scandir(entry or ".")
        except NotADirectoryError:
            return True
        except (OSError, TypeError, ValueError):
            continue  # (absent, unreadable, or not a path: nothing the import system reads there)
        with listing:
            for item in listing:
                if item.name.endswith((".dist-info", ".egg-info")):
                    points = os.path.join(item.path, "entry_points.txt")
                elif item.name.endswith(".egg"):
                    if item.is_file():
                        return True
                    points = os.path.join(item.path, "EGG-INFO", "entry_points.txt")
                else:
                    continue
                try:
                    with open(points, encoding="utf-8", errors="replace") as f:
                        if GROUP in f.read():
                            return True
                except OSError:
                    pass
    return False


def _reads_sys_path(finder) -> bool:
    """Whether a finder of distributions finds only those in `sys.path`'s folders, as
    `declared` reads them: the standard one, and the `importlib_metadata` backport's (put on
    `sys.meta_path` when it is imported, as Dask does)."""
    import importlib.machinery

    cls = finder if isinstance(finder, type) else type(finder)
    return finder is importlib.machinery.PathFinder or (
        cls.__name__ == "MetadataPathFinder" and "importlib_metadata" in cls.__module__)
