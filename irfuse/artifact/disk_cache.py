"""The on-disk cache of compiled code (cubins, host libraries): where it lives, per-entry
locks, atomic writes, checksummed entries.

Entries are keyed by everything that decides their content (source, options, compiler
version), so a hit gives exactly what compiling would; a torn, truncated or corrupt
entry fails its checksum and is rebuilt. Nothing else in irfuse reads this cache: it
saves time and never changes a result.
"""

from __future__ import annotations

import fcntl
import os

try:  # Python's own SHA-256 (3.12 on: `_sha2`; 3.11: `_sha256`): the same digests as hashlib's
    from _sha2 import sha256 as new_sha256
except ImportError:
    try:
        from _sha256 import sha256 as new_sha256
    except ImportError:
        from hashlib import sha256 as new_sha256
# (not hashlib: importing it loads OpenSSL's libcrypto, 4-14 ms of a fresh process, more than
# finding and reading a cached program; the entries hashed here are kilobytes to a few
# megabytes, 3 ms a megabyte this way)


def cache_dir() -> str:
    return os.environ.get("IRFUSE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "irfuse")


def entry_path(kind: str, key: str, suffix: str = "") -> str:
    """Where entry `key` (a hex digest) of one kind (cubin, host) lives."""
    return os.path.join(cache_dir(), kind, key[:2], key + suffix)


class cache_lock:
    """An exclusive lock on one cache entry across processes (advisory, `fcntl.flock`):
    the second process waits, then finds the entry the first one wrote."""

    def __init__(self, path: str):
        self.path = path + ".lock"

    def __enter__(self):
        self.fd = None
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            self.fd = None  # no locking here: atomic writes still keep entries whole
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock


def atomic_write(path: str, data: bytes) -> None:
    """Writes `path` whole or not at all (a temporary file renamed over it)."""
    import tempfile  # (only where something is written: a cached program's load needs none)

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sha256(data: bytes) -> str:
    return new_sha256(data).hexdigest()


def write_checked(path: str, data: bytes) -> bool:
    """Stores `data` and then its checksum beside it (the checksum makes the entry valid);
    False when the cache cannot be written, which only costs rebuilding."""
    try:
        atomic_write(path, data)
        atomic_write(path + ".sha256", sha256(data).encode())
        return True
    except OSError:
        return False


def read_checked(path: str) -> bytes | None:
    """The entry's bytes when they match the checksum written with them, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        with open(path + ".sha256", "rb") as f:
            want = f.read().decode("ascii", "replace").strip()
    except OSError:
        return None
    return data if sha256(data) == want else None
