"""The on-disk cache of compiled programs, behind `irfuse.compile`.

An entry is a plan directory (`CompiledProgram.save`, or a staged program's with a directory per
stage: `irfuse.artifact.stages`) plus the compiler's warnings, under a
key that holds everything compiling reads: the program's text, the options (element type,
backend, pipeline, planning batch, the device profile's figures, architecture, layout), the
op library in use (the installed library entry points, and every op and hand-written
implementation a user added) and the installed irfuse itself (a digest of its source
files, so an edited or upgraded irfuse never reads an older one's entries). A hit therefore
gives what compiling would; an entry that cannot be read whole, or whose files do not
match the checksums written with them, is compiled again (and replaced). Like the
code caches (`irfuse.artifact.disk_cache`) it lives under `IRFUSE_CACHE_DIR` and only saves
time: the front end, the fusion search and the passes (from 0.06 s for the seeds to seconds
for large programs), on top of the NVRTC and host compiles those caches save already.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import zlib
from dataclasses import asdict

from irfuse.artifact.artifact import Artifact
from irfuse.artifact.stages import StagedArtifact, load_plan
from irfuse.artifact.disk_cache import cache_lock, entry_path, new_sha256, read_checked, sha256, write_checked
from irfuse.diagnostics import Diagnostic, IrfuseError
from irfuse.driver.installed import installed_libraries

FORMAT = 5  # 2: entries carry a checksum of every file; 3: the artifact's host plan, the library's additions;
# 4: staged programs (a directory per stage); 5: the files' checksums CRC-32 and size (SHA-256 before)


def _files(root: str, prefix: str = "", pruned: tuple[str, ...] = ()):
    """Every file under `root`, as (its path relative to `root`, its `os.DirEntry`), in a fixed
    order: a folder's files by name, then its folders' by name, those named in `pruned` left
    out and links to folders not followed. (`os.scandir`, not `os.walk` with `relpath`: half the
    time, which a fresh process's cached load pays for irfuse's 200 sources and an entry's files.)"""
    with os.scandir(root) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    yield from ((prefix + e.name, e) for e in entries if not e.is_dir())
    for e in entries:
        if e.is_dir(follow_symlinks=False) and e.name not in pruned:
            yield from _files(e.path, prefix + e.name + "/", pruned)


def _source_files(root: str) -> list[tuple[str, os.stat_result]]:
    """irfuse's source files (`.py`, `.h`) under `root` (the packaged examples and bytecode
    aside), each path relative to `root` with its status, in a fixed order."""
    return [(rel, e.stat()) for rel, e in _files(root, pruned=("__pycache__", "examples"))
            if rel.endswith((".py", ".h"))]


@functools.lru_cache(maxsize=2)
def package_digest(root: str | None = None) -> str:
    """A digest of the source files of the installed irfuse (or of the package at `root`),
    found once per process.

    Reading and hashing every file costs a fresh process more than the rest of loading a cached
    program (13 ms of 50 on the 2-core CI machine), so the digest is kept in the cache under a
    stamp of the files' status: path, size, modification and change times, inode. Any rewrite of a
    file (an edit, a reinstall, a checkout) changes its change time, which no tool can set back,
    so a kept digest is only found for the very files it was read from."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = _source_files(root)
    stamp = repr([(rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for rel, st in files])
    memo = entry_path("package", sha256(stamp.encode()))
    kept = read_checked(memo)
    if kept is not None:
        return kept.decode()
    h = new_sha256()
    for rel, _ in files:
        h.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read() + b"\0")
    write_checked(memo, h.hexdigest().encode())
    return h.hexdigest()


def library_digest(library) -> str:
    """A digest of what a library (`irfuse.library.catalogue.Library`) holds beyond its base:
    every op defined and hand-written implementation added since (a user's library files,
    ops defined in the process). The base of the default library (the built-in catalogue and
    the installed entry points' libraries) is keyed by irfuse's own code and `library_key`."""
    ops, impls = library.additions()
    if not ops and not impls:
        return ""  # (as for a library not loaded yet: a key must not depend on what loaded it)
    h = new_sha256()
    for op in ops:
        h.update(repr((op.name, op.operand_names, [t.spelling() for t in op.operand_types],
                       op.result_type.spelling(), op.definition)).encode())
    for impl in impls:
        h.update(repr((impl.op.name, impl.name, impl.bx, impl.recommended_by, [ap.text() for ap in impl.aps],
                       getattr(impl, "source", ""))).encode())
    return h.hexdigest()


def library_key(library=None) -> dict:
    """What the op library contributes to a key: the installed `irfuse.library` entry points
    (name, target, distribution version) and the digest of what `library` (the default one
    when None) holds beyond its base. Found without loading the library where no part of this
    process has (nothing can have been added then): a process that only runs cached programs
    needs neither the library nor the compiler."""
    points = sorted((ep.name, ep.value, ep.dist.version if ep.dist is not None else None)
                    for ep in installed_libraries())
    if library is None:
        catalogue = sys.modules.get("irfuse.library.catalogue")
        library = getattr(catalogue, "_DEFAULT", None)
    return {"entry_points": points, "additions": library_digest(library) if library is not None else ""}


def program_key(library=None, **inputs) -> str:
    """The entry key of a compile: irfuse, the op library (`library_key`; the default one when
    None) and every input named (JSON-able)."""
    text = json.dumps({"format": FORMAT, "irfuse": package_digest(), "library": library_key(library),
                       **inputs}, sort_keys=True, default=str)
    return sha256(text.encode())


CHECKSUMS = "checksums.json"  # written last: file name -> checksum of every other file of the entry


def file_checksum(data: bytes) -> str:
    """An entry file's checksum: its CRC-32 and its size. It finds what a cache entry meets
    (a file cut short, edited, half written or damaged on disk), as zip and gzip use it; a
    cryptographic digest would add nothing against someone who can rewrite the checksum list
    too, and Python's own SHA-256 took 1.4 ms of a staged program's 500 KB in a fresh process
    (hashlib's imports OpenSSL, more than that), CRC-32 0.1 ms."""
    return f"{zlib.crc32(data):08x}:{len(data)}"


def _checksums(path: str) -> dict[str, str]:
    """The checksum of every file of an entry directory, its stages' directories included (but
    the checksum list), by path relative to the entry."""
    sums = {}
    for rel, e in _files(path):
        if rel != CHECKSUMS:
            with open(e.path, "rb") as f:
                sums[rel] = file_checksum(f.read())
    return sums


def _intact(path: str) -> bool:
    """Whether the entry holds exactly the files its checksum list names, each unchanged
    (an entry edited, cut short or half deleted on disk is compiled again)."""
    try:
        with open(os.path.join(path, CHECKSUMS)) as f:
            want = json.load(f)
        return isinstance(want, dict) and _checksums(path) == want
    except (OSError, ValueError):
        return False


def load(key: str) -> tuple[Artifact | StagedArtifact, list[Diagnostic]] | None:
    """The entry's artifact (or staged program) and warnings, or None (absent, damaged, or not
    readable whole). Reads JSON and bytes only: no compiler is needed to run what the cache
    holds."""
    path = entry_path("program", key)
    if not _intact(path):
        return None
    try:
        program = load_plan(path, checked=True)  # (every file just summed: no digest read again)
        with open(os.path.join(path, "diagnostics.json")) as f:
            diagnostics = [Diagnostic(**d) for d in json.load(f)]
    except (IrfuseError, OSError, ValueError, TypeError):
        return None
    program.meta["loaded_from"] = path
    return program, diagnostics


def store(key: str, program: Artifact | StagedArtifact, diagnostics: list[Diagnostic]) -> None:
    """Writes an entry whole (a directory renamed into place) or not at all."""
    path = entry_path("program", key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with cache_lock(path):  # called after a miss: an unreadable entry is replaced
            import shutil  # (only a store writes: a load imports neither)
            import tempfile

            tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                program.save(tmp)
                with open(os.path.join(tmp, "diagnostics.json"), "w") as f:
                    json.dump([asdict(d) for d in diagnostics], f)
                sums = _checksums(tmp)
                with open(os.path.join(tmp, CHECKSUMS), "w") as f:
                    json.dump(sums, f, indent=1)
                shutil.rmtree(path, ignore_errors=True)  # a damaged or incomplete older entry
                os.replace(tmp, path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        pass  # a cache that cannot be written only costs compiling again
