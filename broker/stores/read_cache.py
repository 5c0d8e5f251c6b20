"""The read cache's side of every store: results of ``read`` tools kept for their TTL.

An entry is keyed by tenant and a digest the caller computes (of the tool and its canonical
arguments, ``broker.execution.read_cache``), so the store never sees a client string as a key.
Entries are bounded by their TTL and, in process memory, by a count: a cache may always forget.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

__all__ = ["CachedResult", "MemoryReadCache", "ReadCacheStore"]

_SWEEP_EVERY = 1024
"""Stores between two sweeps of expired entries (a sweep scans them all)."""

MAX_MEMORY_ENTRIES = 100_000
"""The most entries one process keeps in memory; past it the oldest are forgotten first."""


class CachedResult(msgspec.Struct, frozen=True):
    """One cached result: when it was stored (the storing process's clock) and the result."""

    stored_at: float
    body: bytes
    """The adapter's result object as JSON."""


class ReadCacheStore(Protocol):
    """What the read cache needs from the store; neither call is part of any admission."""

    async def cache_get(self, tenant: str, key: str, *, now: float) -> CachedResult | None:
        """The entry under ``key`` for ``tenant``, unless absent or expired at ``now``."""
        ...

    async def cache_put(self, tenant: str, key: str, entry: CachedResult, *, ttl_s: float) -> None:
        """Keep ``entry`` until ``entry.stored_at + ttl_s`` (replacing any earlier one)."""
        ...


class MemoryReadCache:
    """Cached results in process memory: expired entries are swept as new ones arrive."""

    def __init__(self) -> None:
        super().__init__()
        self._cached: dict[tuple[str, str], tuple[float, CachedResult]] = {}
        self._puts = 0

    async def cache_get(self, tenant: str, key: str, *, now: float) -> CachedResult | None:
        found = self._cached.get((tenant, key))
        if found is None or found[0] <= now:
            return None
        return found[1]

    async def cache_put(self, tenant: str, key: str, entry: CachedResult, *, ttl_s: float) -> None:
        self._remember(tenant, key, entry, entry.stored_at + ttl_s)

    def _remember(self, tenant: str, key: str, entry: CachedResult, expires_at: float) -> None:
        cached = self._cached
        cached.pop((tenant, key), None)  # re-inserted last: the dict's order is oldest first
        cached[(tenant, key)] = (expires_at, entry)
        self._puts += 1
        if self._puts >= _SWEEP_EVERY or len(cached) > MAX_MEMORY_ENTRIES:
            self._puts = 0
            now = entry.stored_at
            for gone in [k for k, (expires, _) in cached.items() if expires <= now]:
                del cached[gone]
            while len(cached) > MAX_MEMORY_ENTRIES:
                del cached[next(iter(cached))]
