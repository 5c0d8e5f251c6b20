"""The store fixture: every contract test runs once per backend (``memory``, ``redis``).

The ``redis`` backend uses ``REDIS_URL`` (default ``redis://127.0.0.1:6379``), a random key
prefix per test, and deletes exactly the keys under that prefix afterwards. When Redis is not
reachable it skips, except under ``CI``, where a missing Redis is a failure.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from broker.stores import MemoryStore, Store
from broker.stores.redis import RedisStore

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


async def _redis_client() -> Redis:
    client = Redis.from_url(
        REDIS_URL,
        socket_timeout=5,
        socket_connect_timeout=2,
        retry=Retry(NoBackoff(), 0),
        max_connections=200,
    )
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        reason = f"Redis is not reachable at {REDIS_URL}: {type(exc).__name__}: {exc}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return client


async def _delete_prefix(client: Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.unlink(*keys[start : start + 500])


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.close()
        return
    client = await _redis_client()
    prefix = f"test-contract-{secrets.token_hex(6)}"
    redis_store = RedisStore(client, prefix=prefix)
    try:
        yield redis_store
    finally:
        await redis_store.close()  # its own connections (the client is not the store's)
        await _delete_prefix(client, prefix)
        await client.aclose()
