"""Identifiers: ULIDs (time-ordered, 128-bit, Crockford base32), cheap enough for every request."""

from __future__ import annotations

import random
import time

__all__ = ["new_ulid"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two base32 characters per 10 bits: 13 table look-ups make one ULID.
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]


def new_ulid() -> str:
    """48 bits of milliseconds then 80 random bits, as the standard 26-character ULID text.

    The random part needs to be unique, not secret (ids grant nothing), so it comes from the
    fast process-seeded generator rather than a system call per id.
    """
    value = ((time.time_ns() // 1_000_000) << 80) | random.getrandbits(80)
    return "".join([_PAIRS[(value >> shift) & 0x3FF] for shift in range(120, -10, -10)])
