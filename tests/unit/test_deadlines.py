"""deadline(): asyncio.timeout's behaviour on one shared timer per duration."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.deadlines import deadline


async def test_a_block_that_overruns_raises_timeout_error_near_its_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadline(0.05):
            await asyncio.sleep(5)
    assert 0.04 <= time.monotonic() - started < 1.0


async def test_a_block_that_finishes_in_time_leaves_no_cancellation_behind() -> None:
    async with deadline(0.05):
        await asyncio.sleep(0)
    await asyncio.sleep(0.1)  # past the deadline: nothing fires at this task any more
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_only_the_overdue_of_many_concurrent_deadlines_time_out() -> None:
    async def run(limit: float, work: float) -> str:
        try:
            async with deadline(limit):
                await asyncio.sleep(work)
        except TimeoutError:
            return "timeout"
        return "done"

    short = [run(0.1, 0.01 if i % 3 else 1.0) for i in range(30)]
    longer = [run(0.3, 0.2) for _ in range(5)]
    outcomes = await asyncio.gather(*short, *longer)
    assert outcomes[:30] == ["done" if i % 3 else "timeout" for i in range(30)]
    assert outcomes[30:] == ["done"] * 5


async def test_a_deadline_set_after_earlier_ones_finished_still_fires() -> None:
    async with deadline(0.2):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadline(0.2):  # the timer armed for the first one must re-arm for this
            await asyncio.sleep(5)
    assert time.monotonic() - started >= 0.15


async def test_someone_elses_cancellation_stays_a_cancellation() -> None:
    entered = asyncio.Event()

    async def guarded() -> None:
        async with deadline(5):
            entered.set()
            await asyncio.sleep(5)

    task = asyncio.create_task(guarded())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_each_event_loop_gets_deadlines_of_its_own() -> None:
    # deadline() remembers the last loop it served; a new loop must not reuse its timers.
    async def overrun() -> bool:
        try:
            async with deadline(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return True
        return False

    assert asyncio.run(overrun())
    assert asyncio.run(overrun())
