"""Expiring values (``broker.stores.expiring``), the same on every store (memory, SQLite, Redis):
per tenant and key, replaced by a second write, gone after their TTL, bounded in size; the
SQLite file keeps them across a restart and sweeps the expired ones; memory is bounded by count
and by bytes. The two callers' keys (the read cache's, the gateway's) never meet."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from broker.gateway.views import MAX_ASIDE_BYTES, keep_aside, load_aside
from broker.stores import MemoryStore, SqliteStore, Store
from broker.stores.expiring import MAX_EXPIRING_BYTES, MAX_MEMORY_BYTES, MAX_MEMORY_VALUES


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_kept_and_read_back_per_tenant_and_key(store: Store) -> None:
    assert await store.get_expiring("acme", "cache:k1") is None
    await store.put_expiring("acme", "cache:k1", b'{"rows":[1,2,3]}', ttl_s=60)
    assert await store.get_expiring("acme", "cache:k1") == b'{"rows":[1,2,3]}'
    await store.put_expiring("globex", "cache:k1", b'{"who":"globex"}', ttl_s=60)
    assert await store.get_expiring("acme", "cache:k1") == b'{"rows":[1,2,3]}'
    assert await store.get_expiring("globex", "cache:k1") == b'{"who":"globex"}'
    assert await store.get_expiring("initech", "cache:k1") is None
    assert await store.get_expiring("acme", "cache:k2") is None
    assert await store.get_expiring("acme", "aside:k1") is None


async def test_a_second_write_replaces_the_first(store: Store) -> None:
    await store.put_expiring("acme", "aside:browse", b"first", ttl_s=60)
    await store.put_expiring("acme", "aside:browse", b"second", ttl_s=60)
    assert await store.get_expiring("acme", "aside:browse") == b"second"


async def test_gone_after_its_ttl(store: Store) -> None:
    # Redis expires by its own clock: the TTL is a real one.
    await store.put_expiring("acme", "short", b"x", ttl_s=0.5)
    assert await store.get_expiring("acme", "short") == b"x"
    await asyncio.sleep(0.6)
    assert await store.get_expiring("acme", "short") is None


async def test_a_non_positive_ttl_forgets(store: Store) -> None:
    await store.put_expiring("acme", "k", b"x", ttl_s=60)
    await store.put_expiring("acme", "k", b"y", ttl_s=0)
    assert await store.get_expiring("acme", "k") is None


async def test_too_large_a_value_is_refused_and_changes_nothing(store: Store) -> None:
    await store.put_expiring("acme", "big", b"small", ttl_s=60)
    with pytest.raises(ValueError, match="at most"):
        await store.put_expiring("acme", "big", b"x" * (MAX_EXPIRING_BYTES + 1), ttl_s=60)
    assert await store.get_expiring("acme", "big") == b"small"
    await store.put_expiring("acme", "big", b"x" * MAX_EXPIRING_BYTES, ttl_s=60)
    assert await store.get_expiring("acme", "big") == b"x" * MAX_EXPIRING_BYTES


async def test_the_gateway_keeps_its_own_keys_and_its_own_limit(store: Store) -> None:
    await keep_aside(store, "acme", "result:h1", b'{"big":true}', ttl_s=60)
    assert await load_aside(store, "acme", "result:h1") == b'{"big":true}'
    assert await store.get_expiring("acme", "result:h1") is None  # not the read cache's key
    with pytest.raises(ValueError, match="kept aside"):
        await keep_aside(store, "acme", "huge", b"x" * (MAX_ASIDE_BYTES + 1), ttl_s=60)
    assert await load_aside(store, "acme", "huge") is None


async def test_sqlite_keeps_live_values_across_a_restart(tmp_path: Path) -> None:
    path, clock = tmp_path / "state.db", Clock()
    first = SqliteStore(path, clock=clock)
    await first.put_expiring("acme", "live", b"kept", ttl_s=600)
    await first.put_expiring("acme", "short", b"gone", ttl_s=60)
    await first.put_expiring("acme", "forgotten", b"x", ttl_s=600)
    await first.put_expiring("acme", "forgotten", b"x", ttl_s=0)
    await first.close()
    clock.now += 120
    second = SqliteStore(path, clock=clock)
    try:
        assert await second.get_expiring("acme", "live") == b"kept"
        assert await second.get_expiring("acme", "short") is None
        assert await second.get_expiring("acme", "forgotten") is None
    finally:
        await second.close()


async def test_sqlite_sweeps_expired_rows_as_it_writes(tmp_path: Path) -> None:
    path, clock = tmp_path / "state.db", Clock()
    store = SqliteStore(path, clock=clock)
    try:
        for i in range(300):  # past the sweep interval; the first 200 have expired by then
            if i == 200:
                clock.now += 3600
            await store.put_expiring("acme", f"k{i}", b"{}", ttl_s=60)
        with sqlite3.connect(path) as db:
            (left,) = db.execute("SELECT count(*) FROM expiring").fetchone()
            (expired,) = db.execute(
                "SELECT count(*) FROM expiring WHERE expires_at <= ?", (clock.now,)
            ).fetchone()
        # The 256th write swept every row expired by then: the 200 old ones.
        assert (expired, left) == (0, 100)
    finally:
        await store.close()


async def test_memory_keeps_a_bounded_number_of_values() -> None:
    store = MemoryStore()
    for i in range(MAX_MEMORY_VALUES + 10):
        await store.put_expiring("acme", f"k{i}", b"{}", ttl_s=60)
    assert await store.get_expiring("acme", "k0") is None  # the oldest went first
    assert await store.get_expiring("acme", "k10") == b"{}"
    assert await store.get_expiring("acme", f"k{MAX_MEMORY_VALUES + 9}") == b"{}"


async def test_memory_keeps_a_bounded_number_of_bytes() -> None:
    store = MemoryStore()
    value = b"x" * MAX_EXPIRING_BYTES
    count = MAX_MEMORY_BYTES // MAX_EXPIRING_BYTES
    for i in range(count + 2):
        await store.put_expiring("acme", f"k{i}", value, ttl_s=60)
    assert await store.get_expiring("acme", "k0") is None  # the oldest went first
    assert await store.get_expiring("acme", "k1") is None
    assert await store.get_expiring("acme", "k2") == value
    assert await store.get_expiring("acme", f"k{count + 1}") == value
