"""Low-level file work for the JSONL sink: locking, writing, reading lines."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["flock", "fsync_dir", "iter_line_batches", "unlock", "write_all"]

_CHUNK = 1 << 20


def flock(fd: int, *, wait: bool = True) -> bool:
    """Take the exclusive lock every writer of the file holds; ``False`` if busy and not ``wait``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)


def write_all(fd: int, data: bytes) -> None:
    """One ``os.write`` (looping only if the kernel takes less, e.g. when the disk fills)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    """Make a newly created file's directory entry durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def iter_line_batches(fd: int, begin: int, stop: int) -> Iterator[list[bytes]]:
    """Complete lines (newline stripped) between two byte offsets: a list per 1 MiB read."""
    carry = b""
    pos = begin
    while pos < stop:
        chunk = os.pread(fd, min(_CHUNK, stop - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        lines = chunk.split(b"\n")
        lines[0] = carry + lines[0]  # not carry + chunk: that would copy the whole chunk
        carry = lines.pop()
        if lines:
            yield lines
