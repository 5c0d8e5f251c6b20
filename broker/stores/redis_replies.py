"""Replies from Redis, read: a text or bytes value, and the verdict of an idempotency script.

Redis answers bytes (the store's clients never decode); anything else where a value should be
is a reply the store cannot trust, so it is a :class:`~broker.taxonomy.StoreUnavailableError`,
as a fault on the way would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from broker.stores.base import Conflict, Replay, StoredResponse
from broker.taxonomy import StoreUnavailableError

__all__ = ["as_bytes", "as_str", "idem_verdict"]

_responses = msgspec.msgpack.Decoder(StoredResponse)


def as_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise StoreUnavailableError(f"unexpected reply from Redis: {value!r:.80}")


def as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise StoreUnavailableError(f"unexpected reply from Redis: {value!r:.80}")


def idem_verdict(reply: Sequence[Any], now: float) -> Replay | Conflict:
    """A key's verdict as ``idem_verdict`` of ``lua/idem.lua`` gave it (through ``admit`` or
    ``lookup``): the stored response to replay, or the conflict."""
    tag = as_str(reply[0])
    if tag == "replay":
        try:
            return Replay(_responses.decode(as_bytes(reply[1])))
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError("unreadable stored response in Redis") from exc
    if tag == "conflict":
        kind = as_str(reply[1])
        if kind == "in_progress":
            lease_until = float(as_str(reply[2]))
            return Conflict("in_progress", max(lease_until - now, 0.001))
        if kind == "reused":
            return Conflict("reused")
        if kind == "outcome_unknown":
            return Conflict("outcome_unknown")
    raise StoreUnavailableError(f"unexpected script reply from Redis: {tag!r:.40}")
