"""The parts of a backend's guard on a real event loop: bulkhead queueing, and breakers shared
through a real Redis (one probe among many processes, time from Redis's own clock)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from broker.resilience.breaker import BreakerState, CircuitBreaker
from broker.resilience.breaker_redis import RedisBreakerStates
from broker.resilience.bulkhead import Bulkhead
from broker.resilience.retry_budget import RetryBudget

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


async def test_the_bulkhead_serves_waiters_first_come_first_served() -> None:
    bulkhead = Bulkhead(1)
    assert await bulkhead.acquire(0.1)
    order: list[int] = []

    async def wait(n: int) -> None:
        assert await bulkhead.acquire(5)
        order.append(n)
        await asyncio.sleep(0.01)
        bulkhead.release()

    waiters = [asyncio.create_task(wait(n)) for n in range(5)]
    await asyncio.sleep(0.01)
    assert bulkhead.queued == 5
    bulkhead.release()
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2, 3, 4]
    assert (bulkhead.in_flight, bulkhead.queued) == (0, 0)


async def test_a_waiter_that_gives_up_or_is_cancelled_keeps_no_slot() -> None:
    bulkhead = Bulkhead(1)
    assert await bulkhead.acquire(0.1)
    assert not await bulkhead.acquire(0.05)  # timed out: refused and counted
    cancelled = asyncio.create_task(bulkhead.acquire(5))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    bulkhead.release()
    assert (bulkhead.in_flight, bulkhead.rejected) == (0, 1)
    assert await bulkhead.acquire(0)  # the slot is free, nobody holds it


async def test_a_lowered_limit_applies_as_calls_finish() -> None:
    bulkhead = Bulkhead(3)
    for _ in range(3):
        assert await bulkhead.acquire(0)
    bulkhead.limit = 1
    waiter = asyncio.create_task(bulkhead.acquire(5))
    bulkhead.release()
    bulkhead.release()
    await asyncio.sleep(0.01)
    assert not waiter.done() and bulkhead.in_flight == 1
    bulkhead.release()
    assert await waiter and bulkhead.in_flight == 1


def test_the_retry_budget_is_a_share_of_the_calls_in_a_sliding_window() -> None:
    now = [1000.0]
    budget = RetryBudget(ratio=0.2, window_s=10, min_retries=1, clock=lambda: now[0])
    for _ in range(10):
        budget.called()
    granted = sum(budget.try_retry() for _ in range(10))
    assert granted == 3 and budget.denied == 7  # 1 + 20 % of 10
    now[0] += 10.5  # the window moved past them: only the floor is left
    assert budget.try_retry() and not budget.try_retry()


@pytest.fixture
async def shared() -> AsyncIterator[RedisBreakerStates]:
    client = Redis.from_url(REDIS_URL)
    prefix = f"utest-{uuid.uuid4().hex[:12]}"
    try:
        await client.ping()
    except Exception:
        pytest.skip("needs Redis")
    yield RedisBreakerStates(client, prefix)
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


_CLOCKS = 0.01
"""What the store's clock (Redis' TIME) and this process's may disagree by over one test."""


async def test_an_expired_shared_breaker_gives_exactly_one_probe(
    shared: RedisBreakerStates,
) -> None:
    backend = "http://127.0.0.1:9"
    assert await shared.check(backend, 1.0) is None  # never opened: closed
    # The bounds below allow for the time the calls took (a busy machine may take long), not
    # for a fixed guess of it: what is left can be no less than the time given less that.
    started = time.monotonic()
    await shared.open(backend, 0.3)
    remaining = await shared.check(backend, 1.0)
    took = time.monotonic() - started
    assert remaining is not None and 0.3 - took - _CLOCKS < remaining <= 0.3
    await asyncio.sleep(0.35)
    started = time.monotonic()
    answers = await asyncio.gather(*(shared.check(backend, 1.0) for _ in range(10)))
    took = time.monotonic() - started
    assert answers.count(0) == 1  # one caller probes; the others wait out its deadline
    assert all(a is not None and 1.0 - took - _CLOCKS < a <= 1.0 for a in answers if a != 0)
    await shared.close(backend)
    assert await shared.check(backend, 1.0) is None


async def test_a_process_follows_a_breaker_another_opened(shared: RedisBreakerStates) -> None:
    backend = "http://127.0.0.1:10"
    opener = CircuitBreaker(backend, failures=2, open_s=5, shared=shared)
    follower = CircuitBreaker(backend, failures=2, open_s=5, shared=shared)
    assert await opener.admit(1.0) is None
    opener.failed()
    opener.failed()
    assert opener.state is BreakerState.OPEN
    await asyncio.sleep(0.05)  # published in the background
    retry_after = await follower.admit(1.0)
    assert retry_after is not None and 4 < retry_after <= 5
    assert follower.state is BreakerState.OPEN and follower.rejected == 1
