"""Timestamps as they appear on the wire and in the ledger: RFC 3339, UTC, milliseconds."""

from __future__ import annotations

import functools
import math
import time

__all__ = ["at_millisecond", "utc_now"]

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
        _text = _prefix + _MILLISECONDS[fraction]
        _millisecond = millisecond
    return _text


# ".000Z" to ".999Z": indexing a table costs a fraction of formatting the number each time.
_MILLISECONDS = tuple(f".{millisecond:03d}Z" for millisecond in range(1000))


@functools.lru_cache(maxsize=256)
def _date_and_time(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def at_millisecond(epoch: float) -> str:
    """``epoch`` (seconds) as ``2026-11-22T10:00:00.000Z``: exactly what ``datetime``'s
    ``isoformat(timespec="milliseconds")`` writes (rounded to the microsecond, then cut), at a
    third of its cost, for the times an approval carries (requested, expires, decided)."""
    fraction, whole = math.modf(epoch)  # as datetime.fromtimestamp splits and rounds it
    second, micros = int(whole), round(fraction * 1_000_000)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    return _date_and_time(second) + _MILLISECONDS[micros // 1000]
