"""Identifiers: ULIDs (time-ordered, 128-bit, Crockford base32), cheap enough for every request."""

from __future__ import annotations

import random
import time

__all__ = ["new_lease_owner", "new_ulid"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two base32 characters per 10 bits: 5 table look-ups make the time part.
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
# Any byte to the character of its low 5 bits: a random byte is a random character (256 is a
# multiple of 32), so 16 random bytes translated are the random part's 16 characters.
_CHARACTER_OF_BYTE = bytes(ord(_CROCKFORD[byte % 32]) for byte in range(256))

_TIME_SHIFTS = (40, 30, 20, 10, 0)
_millisecond = -1
_time_part = ""


def new_ulid() -> str:
    """48 bits of milliseconds then 80 random bits, as the standard 26-character ULID text.

    The random part needs to be unique, not secret (ids grant nothing), so it comes from the
    fast process-seeded generator rather than a system call per id. Several ids share each
    millisecond under load, so its ten characters are written once per millisecond.
    """
    global _millisecond, _time_part
    millisecond = time.time_ns() // 1_000_000
    if millisecond != _millisecond:
        _time_part = "".join([_PAIRS[(millisecond >> shift) & 0x3FF] for shift in _TIME_SHIFTS])
        _millisecond = millisecond
    # 80 random bits as 16 characters, each from a byte of its own: one C call per step, where
    # cutting 80 bits into 5-bit groups took 16 operations on a large int.
    random_part = random.getrandbits(128).to_bytes(16, "big").translate(_CHARACTER_OF_BYTE)
    return _time_part + random_part.decode("ascii")


def new_lease_owner() -> str:
    """A token naming who holds an idempotency lease (compare-and-set on completion).

    It must differ between holders, not be secret: it never leaves the broker and its store, so
    64 bits of the process-seeded generator (reseeded in forked children) do, without a system
    call per proposal.
    """
    return random.getrandbits(64).to_bytes(8, "big").hex()  # 16 hex digits, twice as fast as f""
