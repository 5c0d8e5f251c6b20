"""RedisServerClock against a real Redis: Redis's TIME, advanced locally; a stand-in until then."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from broker.stores.redis_clock import RedisServerClock
from tests.redis_helpers import connected_redis


async def test_it_follows_redis_time_not_this_machines_clock() -> None:
    client = await connected_redis()
    try:
        two_hours_off = RedisServerClock(client, lambda: time.time() + 7200)
        assert two_hours_off() == pytest.approx(time.time() + 7200, abs=1)  # not synced: stand-in
        assert await two_hours_off.sync()
        assert two_hours_off.synced
        seconds, micros = await client.time()
        assert two_hours_off() == pytest.approx(seconds + micros / 1e6, abs=0.05)
    finally:
        await client.aclose()


async def test_an_unreachable_redis_keeps_the_stand_in() -> None:
    unreachable = Redis(port=1, socket_connect_timeout=0.2)
    clock = RedisServerClock(unreachable, lambda: 42.0)
    assert not await clock.sync()
    assert clock() == 42.0
    await unreachable.aclose()
