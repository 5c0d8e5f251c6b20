"""The end of a JSONL ledger: where the last complete line stops and the chain head it holds.

Appending needs only this, never the lines before: the head comes from the last complete line,
read backwards from the end of the file, so opening a ledger of any size reads a few kilobytes.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec

from broker.ledger.model import AuditRef
from broker.ledger.sealing import decode_seq

__all__ = ["ChainTail", "read_tail"]

_log = logging.getLogger("broker.ledger")
_BACKWARD_CHUNK = 1 << 16


class ChainTail(msgspec.Struct, frozen=True):
    """What one process knows about the end of the file, as of its last look."""

    end: int = 0
    """Byte offset just past the last complete line."""
    head: AuditRef | None = None
    """The last record that could be read: the one the next append chains onto."""
    malformed: bool = False
    """The last complete line could not be parsed: the head is unknown, appends must stop."""


def read_tail(fd: int, tail: ChainTail, path: Path, *, repair: bool) -> ChainTail:
    """The tail after whatever was appended (by anyone) since ``tail`` was read.

    A trailing partial line is left alone, unless ``repair``: then it is a torn record (only
    safe to decide while holding the exclusive lock, when no writer can be mid-line) and is cut.
    """
    size = os.fstat(fd).st_size
    if size < tail.end:
        _log.warning("ledger %s shrank to %d bytes; reading its end again", path, size)
        tail = ChainTail()
    if size > tail.end:
        last_newline = _rfind_newline(fd, tail.end, size)
        if last_newline >= 0:
            tail = _last_line(fd, tail, last_newline, path)
        if tail.end < size and repair:
            _log.warning(
                "ledger %s ends with a torn record (%d bytes without newline); truncating it",
                path,
                size - tail.end,
            )
            os.ftruncate(fd, tail.end)
            os.fsync(fd)
    return tail


def _last_line(fd: int, known: ChainTail, newline: int, path: Path) -> ChainTail:
    """The tail whose last complete line ends at ``newline``, which lies past ``known.end``.

    A malformed last line stops appends; the head then stays the last record that parses, found
    by stepping back line by line (what ``ledger head`` and checkpoints still report).
    """
    end = newline + 1
    while newline >= 0:
        start = _rfind_newline(fd, 0, newline) + 1
        try:
            view = decode_seq(os.pread(fd, newline - start, start))
        except msgspec.DecodeError:
            if end == newline + 1:
                _log.warning("the last line of ledger %s is malformed; run `ledger verify`", path)
            if start <= known.end:  # the lines before were read already: their head stands
                return ChainTail(end, known.head, malformed=True)
            newline = start - 1
            continue
        return ChainTail(end, AuditRef(view.seq, view.hash), malformed=end != newline + 1)
    return ChainTail(end, None, malformed=True)


def _rfind_newline(fd: int, low: int, high: int) -> int:
    """Offset of the last newline in the file's bytes ``[low, high)``, or -1 if there is none."""
    while high > low:
        start = max(low, high - _BACKWARD_CHUNK)
        found = os.pread(fd, high - start, start).rfind(b"\n")
        if found >= 0:
            return start + found
        high = start
    return -1
