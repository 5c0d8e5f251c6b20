"""The demo backend's shared ticket/credit numbers: distinct across processes, one INCRBY a block."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest

from adapters.demo.backend import RedisNumbers
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix

pytestmark = pytest.mark.redis


@pytest.fixture
async def namespace() -> AsyncIterator[str]:
    client = await connected_redis()  # skips when no Redis answers
    prefix = f"test-numbers-{secrets.token_hex(6)}"
    try:
        yield prefix
    finally:
        await forget_prefix(client, prefix)
        await client.aclose()


async def test_two_processes_never_hand_out_one_number_twice(namespace: str) -> None:
    first, second = (
        RedisNumbers(REDIS_URL, namespace, block=3),
        RedisNumbers(REDIS_URL, namespace, block=3),
    )
    try:
        a = [await first.next("ticket") for _ in range(5)]
        b = [await second.next("ticket") for _ in range(5)]
        a += [await first.next("ticket") for _ in range(5)]
        assert a == sorted(a)  # increasing within one process
        assert len(set(a + b)) == 15
        assert a[0] == 1 and b[0] == 7  # blocks 1-3 and 4-6 are the first's, 7-9 the second's
        assert await first.next("credit") == 1  # each kind has its own numbers
    finally:
        await first.aclose()
        await second.aclose()


async def test_callers_waiting_on_a_refill_share_it(namespace: str) -> None:
    numbers = RedisNumbers(REDIS_URL, namespace, block=10)
    client = await connected_redis()
    try:
        taken = await asyncio.gather(*(numbers.next("ticket") for _ in range(50)))
        assert sorted(taken) == list(range(1, 51))
        # 50 concurrent calls reserved exactly five blocks: none was reserved and wasted
        assert int(await client.get(f"{namespace}:ticket") or 0) == 50
    finally:
        await numbers.aclose()
        await client.aclose()
