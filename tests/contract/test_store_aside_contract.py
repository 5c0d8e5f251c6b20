"""Values kept aside (``broker.stores.aside``), the same on every store: per tenant, replaced by
a second write, gone after their TTL, bounded in size."""

from __future__ import annotations

import asyncio

import pytest

from broker.stores import Store
from broker.stores.aside import MAX_ASIDE_BYTES


async def test_kept_and_read_back_per_tenant(store: Store) -> None:
    assert await store.load_aside("acme", "result:h1") is None
    await store.keep_aside("acme", "result:h1", b'{"rows":[1,2,3]}', ttl_s=60)
    assert await store.load_aside("acme", "result:h1") == b'{"rows":[1,2,3]}'
    # Another tenant's key of the same name is another value: here, none.
    assert await store.load_aside("globex", "result:h1") is None
    assert await store.load_aside("acme", "result:h2") is None


async def test_a_second_write_replaces_the_first(store: Store) -> None:
    await store.keep_aside("acme", "browse:s1", b"first", ttl_s=60)
    await store.keep_aside("acme", "browse:s1", b"second", ttl_s=60)
    assert await store.load_aside("acme", "browse:s1") == b"second"


async def test_gone_after_its_ttl(store: Store) -> None:
    await store.keep_aside("acme", "short", b"x", ttl_s=1)
    assert await store.load_aside("acme", "short") == b"x"
    await asyncio.sleep(1.1)
    assert await store.load_aside("acme", "short") is None


async def test_a_non_positive_ttl_forgets(store: Store) -> None:
    await store.keep_aside("acme", "k", b"x", ttl_s=60)
    await store.keep_aside("acme", "k", b"y", ttl_s=0)
    assert await store.load_aside("acme", "k") is None


async def test_too_large_a_value_is_refused_and_keeps_nothing(store: Store) -> None:
    with pytest.raises(ValueError, match="kept aside"):
        await store.keep_aside("acme", "big", b"x" * (MAX_ASIDE_BYTES + 1), ttl_s=60)
    assert await store.load_aside("acme", "big") is None
    await store.keep_aside("acme", "big", b"x" * MAX_ASIDE_BYTES, ttl_s=60)
    assert await store.load_aside("acme", "big") == b"x" * MAX_ASIDE_BYTES
