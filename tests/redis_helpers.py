"""Redis for tests: a reachable client or a clear skip (a failure in CI, where `make test` always
provides one), and key prefixes of the test's own, deleted afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def missing_redis(reason: str) -> NoReturn:
    """Skip the test on a machine without Redis; in CI a Redis test that cannot run fails."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


async def connected_redis(url: str = REDIS_URL, **options: Any) -> Redis:
    """A client that answered PING (``options`` go to ``Redis.from_url``)."""
    client = Redis.from_url(url, **options)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        missing_redis(f"Redis is not reachable at {url}: {type(exc).__name__}: {exc}")
    return client


async def forget_prefix(client: Redis, prefix: str) -> None:
    """Delete the keys under ``prefix`` (and only those: the Redis may be shared)."""
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.unlink(*keys[start : start + 500])


@asynccontextmanager
async def own_prefix(**options: Any) -> AsyncIterator[tuple[Redis, str]]:
    """A connected client and a fresh key prefix; the prefix's keys are deleted afterwards."""
    client = await connected_redis(**options)
    prefix = f"test:{uuid.uuid4().hex}"
    try:
        yield client, prefix
    finally:
        await forget_prefix(client, prefix)
        await client.aclose()
