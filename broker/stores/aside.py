"""Short-lived values kept aside for a tenant: large results, and what a session has browsed.

The gateway (``broker.gateway``) keeps a ``tool_execute`` result too large to answer inline, and
each session's browse memory, here: in the store, so that with Redis another process serving the
same session reads them back. Values are opaque bytes under a key the caller builds from
trusted parts (route, session, a random handle); each expires after its TTL.

The memory store keeps them in process memory, bounded in total size (the oldest go first);
the SQLite store inherits that (one process owns its file, and these values outlive no TTL
worth a disk write); Redis keeps them under the tenant's slot (``broker.stores.redis_aside``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["MAX_ASIDE_BYTES", "AsideStore", "MemoryAside"]

MAX_ASIDE_BYTES = 1 << 20
"""The largest value a store keeps aside; larger ones are refused (``ValueError``)."""

_MEMORY_BUDGET_BYTES = 64 << 20
"""What the memory store keeps aside at most, all tenants together; the oldest go first."""


class AsideStore(Protocol):
    """What ``broker.gateway`` needs from the store."""

    async def keep_aside(self, tenant: str, key: str, value: bytes, *, ttl_s: int) -> None:
        """Keep ``value`` under ``(tenant, key)`` for ``ttl_s`` seconds (replacing any)."""
        ...

    async def load_aside(self, tenant: str, key: str) -> bytes | None:
        """The value kept under ``(tenant, key)``, or ``None`` (never kept, or expired)."""
        ...


class MemoryAside:
    """The aside values in process memory, in insertion order (so the oldest is first)."""

    _clock: Callable[[], float]

    def __init__(self) -> None:
        super().__init__()  # the stores combine it with other sides
        self._aside: dict[tuple[str, str], tuple[bytes, float]] = {}
        self._aside_bytes = 0

    async def keep_aside(self, tenant: str, key: str, value: bytes, *, ttl_s: int) -> None:
        if len(value) > MAX_ASIDE_BYTES:
            raise ValueError(f"at most {MAX_ASIDE_BYTES} bytes are kept aside")
        slot = (tenant, key)
        self._forget(slot)
        if ttl_s <= 0:
            return
        self._aside[slot] = (value, self._clock() + ttl_s)
        self._aside_bytes += len(value)
        while self._aside_bytes > _MEMORY_BUDGET_BYTES:
            self._forget(next(iter(self._aside)))

    async def load_aside(self, tenant: str, key: str) -> bytes | None:
        found = self._aside.get((tenant, key))
        if found is None:
            return None
        if found[1] <= self._clock():
            self._forget((tenant, key))
            return None
        return found[0]

    def _forget(self, slot: tuple[str, str]) -> None:
        gone = self._aside.pop(slot, None)
        if gone is not None:
            self._aside_bytes -= len(gone[0])
