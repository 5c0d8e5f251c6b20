"""Timestamps as they appear on the wire and in the ledger: RFC 3339, UTC, milliseconds."""

from __future__ import annotations

import time

__all__ = ["utc_now"]

_second = -1
_prefix = ""


def utc_now() -> str:
    """Now, e.g. ``2026-11-22T10:00:00.000Z``; a few calls per proposal, so the date and time
    part is formatted once per second and reused."""
    global _second, _prefix
    now = time.time()
    second = int(now)
    if second != _second:
        _prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = second
    return f"{_prefix}.{int((now - second) * 1000):03d}Z"
