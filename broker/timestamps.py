"""Timestamps as they appear on the wire and in the ledger: RFC 3339, UTC, milliseconds."""

from __future__ import annotations

import time

__all__ = ["utc_now"]

_second = -1
_prefix = ""
_millisecond = -1
_text = ""


def utc_now() -> str:
    """Now, e.g. ``2026-11-22T10:00:00.000Z``.

    Each proposal asks a few times, and under load several proposals share a millisecond: the
    text is written once per millisecond (its date and time part once per second) and reused.
    """
    global _second, _prefix, _millisecond, _text
    millisecond = time.time_ns() // 1_000_000
    if millisecond != _millisecond:
        second, fraction = divmod(millisecond, 1000)
        if second != _second:
            _prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            _second = second
        _text = f"{_prefix}.{fraction:03d}Z"
        _millisecond = millisecond
    return _text
