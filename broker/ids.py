"""Identifiers: ULIDs (time-ordered, 128-bit, Crockford base32), cheap enough for every request."""

from __future__ import annotations

import random
import time

__all__ = ["new_lease_owner", "new_ulid"]

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


def new_lease_owner() -> str:
    """A token naming who holds an idempotency lease (compare-and-set on completion).

    It must differ between holders, not be secret: it never leaves the broker and its store, so
    64 bits of the process-seeded generator (reseeded in forked children) do, without a system
    call per proposal.
    """
    return f"{random.getrandbits(64):016x}"
