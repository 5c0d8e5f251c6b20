"""Expiring values: short-lived bytes a store keeps per tenant under a caller's key, for a TTL.

Two callers share this side, each under keys of its own prefix so that they never meet: the
read cache (``broker.execution.read_cache``: ``cache:`` and a digest of tool and arguments) and
the gateway (``broker.gateway.views``: ``aside:`` and large results or a session's browse
memory). Values are opaque bytes; a caller encodes and bounds what it keeps. The store never
sees a client string as a key: callers build theirs from trusted parts.

Every value may be forgotten before its TTL (a memory store is bounded), never served after it.
The memory store keeps them in process memory, bounded by count and by total size (the oldest
go first); SQLite adds a table of its own (``broker.stores.sqlite_expiring``), so they outlive
a restart; Redis keeps one string per value under the tenant's slot, expired by Redis itself
(``broker.stores.redis_expiring``), shared by every process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = [
    "MAX_EXPIRING_BYTES",
    "MAX_MEMORY_BYTES",
    "MAX_MEMORY_VALUES",
    "ExpiringValues",
    "MemoryExpiring",
    "check_size",
]

MAX_EXPIRING_BYTES = 2 << 20
"""The largest value a store keeps (``ValueError`` past it): room for each caller's own
limit, which is lower, and its framing."""

MAX_MEMORY_BYTES = 64 << 20
"""What one process keeps in memory at most, all tenants together; the oldest go first."""

MAX_MEMORY_VALUES = 100_000
"""The most values one process keeps in memory; past it the oldest go first."""

_SWEEP_EVERY = 1024
"""Writes between two sweeps of expired values (a sweep scans them all)."""


class ExpiringValues(Protocol):
    """What the read cache and the gateway need from the store; no call is part of an admission."""

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        """Keep ``value`` under ``(tenant, key)`` for ``ttl_s`` seconds, replacing any earlier
        one; a ``ttl_s`` of zero or less forgets it. ``ValueError`` past ``MAX_EXPIRING_BYTES``
        (and nothing changes)."""
        ...

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        """The value under ``(tenant, key)``, or ``None`` (never kept, forgotten, or expired)."""
        ...


def check_size(value: bytes) -> None:
    """Refuse a value past ``MAX_EXPIRING_BYTES``, before any store changes."""
    if len(value) > MAX_EXPIRING_BYTES:
        raise ValueError(f"a store keeps expiring values of at most {MAX_EXPIRING_BYTES} bytes")


class MemoryExpiring:
    """Expiring values in process memory, in insertion order (so the oldest is first)."""

    _clock: Callable[[], float]

    def __init__(self) -> None:
        super().__init__()  # the stores combine it with other sides
        self._expiring: dict[tuple[str, str], tuple[bytes, float]] = {}
        self._expiring_bytes = 0
        self._expiring_puts = 0

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        check_size(value)
        if ttl_s <= 0:
            self._forget((tenant, key))
            return
        now = self._clock()
        self._remember(tenant, key, value, now + ttl_s, now=now)

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        found = self._expiring.get((tenant, key))
        if found is None:
            return None
        if found[1] <= self._clock():
            self._forget((tenant, key))
            return None
        return found[0]

    def _remember(
        self, tenant: str, key: str, value: bytes, expires_at: float, *, now: float
    ) -> None:
        slot = (tenant, key)
        self._forget(slot)  # re-inserted last: the dict's order is oldest first
        kept = self._expiring
        kept[slot] = (value, expires_at)
        self._expiring_bytes += len(value)
        self._expiring_puts += 1
        if self._expiring_puts >= _SWEEP_EVERY:
            self._expiring_puts = 0
            for gone in [k for k, (_, expires) in kept.items() if expires <= now]:
                self._forget(gone)
        while len(kept) > MAX_MEMORY_VALUES or self._expiring_bytes > MAX_MEMORY_BYTES:
            self._forget(next(iter(kept)))

    def _forget(self, slot: tuple[str, str]) -> None:
        gone = self._expiring.pop(slot, None)
        if gone is not None:
            self._expiring_bytes -= len(gone[0])
