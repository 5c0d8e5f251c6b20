"""The read cache's side of every store (memory, SQLite, Redis): entries kept for their TTL, per
tenant, replaced by a newer one; the SQLite file keeps them across a restart and sweeps the
expired ones."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import cast

from broker.stores import SqliteStore, Store
from broker.stores.read_cache import (
    MAX_MEMORY_ENTRIES,
    CachedResult,
    MemoryReadCache,
    ReadCacheStore,
)


def cache(store: Store) -> ReadCacheStore:
    return cast(ReadCacheStore, store)


async def test_an_entry_is_served_until_its_ttl_ends(store: Store) -> None:
    kept = cache(store)
    now = time.time()  # Redis expires by its own clock: the entry's times are real ones
    assert await kept.cache_get("acme", "k1", now=now) is None
    entry = CachedResult(now, b'{"rate":1.25}')
    await kept.cache_put("acme", "k1", entry, ttl_s=0.5)
    assert await kept.cache_get("acme", "k1", now=now + 0.1) == entry
    await asyncio.sleep(0.6)
    assert await kept.cache_get("acme", "k1", now=time.time()) is None


async def test_entries_are_per_tenant_and_per_key(store: Store) -> None:
    kept = cache(store)
    now = time.time()
    await kept.cache_put("acme", "k1", CachedResult(now, b'{"who":"acme"}'), ttl_s=30)
    await kept.cache_put("globex", "k1", CachedResult(now, b'{"who":"globex"}'), ttl_s=30)
    acme = await kept.cache_get("acme", "k1", now=now)
    globex = await kept.cache_get("globex", "k1", now=now)
    assert acme is not None and acme.body == b'{"who":"acme"}'
    assert globex is not None and globex.body == b'{"who":"globex"}'
    assert await kept.cache_get("acme", "k2", now=now) is None
    assert await kept.cache_get("initech", "k1", now=now) is None


async def test_a_newer_entry_replaces_the_older(store: Store) -> None:
    kept = cache(store)
    now = time.time()
    await kept.cache_put("acme", "k1", CachedResult(now, b'{"n":1}'), ttl_s=30)
    await kept.cache_put("acme", "k1", CachedResult(now + 1, b'{"n":2}'), ttl_s=30)
    assert await kept.cache_get("acme", "k1", now=now + 1) == CachedResult(now + 1, b'{"n":2}')


async def test_sqlite_keeps_live_entries_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    now = time.time()
    first = SqliteStore(path)
    await first.cache_put("acme", "live", CachedResult(now, b"{}"), ttl_s=60)
    await first.cache_put("acme", "gone", CachedResult(now - 120, b"{}"), ttl_s=60)
    await first.close()
    second = SqliteStore(path)
    try:
        assert await second.cache_get("acme", "live", now=now) == CachedResult(now, b"{}")
        assert await second.cache_get("acme", "gone", now=now) is None
    finally:
        await second.close()


async def test_sqlite_sweeps_expired_rows_as_it_writes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    now = time.time()
    try:
        for i in range(300):  # past the sweep interval; the first 200 expired long ago
            stored_at = now - 3600 if i < 200 else now
            await store.cache_put("acme", f"k{i}", CachedResult(stored_at, b"{}"), ttl_s=60)
        with sqlite3.connect(path) as db:
            (left,) = db.execute("SELECT count(*) FROM read_cache").fetchone()
            (expired,) = db.execute(
                "SELECT count(*) FROM read_cache WHERE expires_at <= ?", (now,)
            ).fetchone()
        # The 256th write swept every row expired by then: the 200 old ones.
        assert (expired, left) == (0, 100)
    finally:
        await store.close()


async def test_memory_keeps_a_bounded_number_of_entries() -> None:
    kept = MemoryReadCache()
    now = time.time()
    for i in range(MAX_MEMORY_ENTRIES + 10):
        await kept.cache_put("acme", f"k{i}", CachedResult(now, b"{}"), ttl_s=60)
    assert await kept.cache_get("acme", "k0", now=now) is None  # the oldest went first
    assert await kept.cache_get("acme", f"k{MAX_MEMORY_ENTRIES + 9}", now=now) is not None
