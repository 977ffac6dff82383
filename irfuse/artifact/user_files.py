"""Files a user names to irfuse (a program's source, a register table, a tuning result, a
device profile), read as text with limits: a regular file or a pipe (a shell's process
substitution, `<(...)`), at most `MAX_BYTES`. A device such as `/dev/zero`, read to its end,
took the machine's memory; a socket or a directory has no text to give. What is refused is
an `OSError` whose `strerror` says why, so each reader's own handling names the file."""

from __future__ import annotations

import errno
import os
import stat

MAX_BYTES = 256 << 20  # (a program's source of 256 MiB is millions of statements: past what compiles)


def read_text(path: str, encoding: str = "utf-8", limit: int = MAX_BYTES) -> str:
    """The text of file `path`; `OSError` for a file that is not a regular file or a pipe, or
    holds more than `limit` bytes (`UnicodeDecodeError` where the bytes are not `encoding`)."""
    return read_bytes(path, limit).decode(encoding)


def read_bytes(path: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of file `path`, with `read_text`'s limits."""
    with open(path, "rb") as f:
        check_kind(os.fstat(f.fileno()), path, limit)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def check_readable(path: str, limit: int = MAX_BYTES) -> None:
    """`read_bytes`'s checks without reading (for a reader of its own, which a pipe's bytes
    must still reach): what `os.stat` tells, a regular file's size included."""
    check_kind(os.stat(path), path, limit)


def check_kind(status: os.stat_result, path: str, limit: int) -> None:
    """`OSError` unless `status` is a regular file of at most `limit` bytes or a pipe."""
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise OSError(errno.EINVAL, "not a regular file (a device or a socket: its text has no end)", path)
    if stat.S_ISREG(mode) and status.st_size > limit:
        raise _too_large(path, limit)


def _too_large(path: str, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"larger than {limit >> 20} MiB, more than irfuse reads of such a file", path)
