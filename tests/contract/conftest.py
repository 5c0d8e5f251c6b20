"""The store fixture: every contract test runs once per backend (``memory``, ``sqlite``,
``redis``).

The ``sqlite`` backend is a fresh database file in the test's temporary directory.

The Redis backend uses ``REDIS_URL`` (default ``redis://127.0.0.1:6379``), a random key
prefix per test, and deletes exactly the keys under that prefix afterwards. When Redis is not
reachable it skips, except under ``CI``, where a missing Redis is a failure.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from broker.stores import MemoryStore, SqliteStore, Store
from broker.stores.redis import RedisStore
from tests.redis_helpers import connected_redis, forget_prefix


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param in ("memory", "sqlite"):
        local = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
        yield local
        await local.close()
        return
    client = await connected_redis(
        socket_timeout=5,
        socket_connect_timeout=2,
        retry=Retry(NoBackoff(), 0),
        max_connections=200,
    )
    prefix = f"test-contract-{secrets.token_hex(6)}"
    redis_store = RedisStore(client, prefix=prefix)
    try:
        yield redis_store
    finally:
        await redis_store.close()  # its own connections (the client is not the store's)
        await forget_prefix(client, prefix)
        await client.aclose()
