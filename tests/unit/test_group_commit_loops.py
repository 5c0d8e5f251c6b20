"""Group commit and the event loop: asked for once per burst of submits, not once per item, and
still right when one group serves one loop after another (as tests do)."""

from __future__ import annotations

import asyncio

import pytest

from broker.ledger.batching import GroupCommit


def _echoing_group() -> GroupCommit[int, int]:
    async def commit(items: list[int]) -> list[int | Exception]:
        return list(items)

    return GroupCommit(commit, name="test")


async def test_a_burst_of_submits_asks_for_the_running_loop_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ask is a getpid() syscall under CPython 3.11: once per burst, not per item."""
    asked = 0
    real = asyncio.get_running_loop

    def counting() -> asyncio.AbstractEventLoop:
        nonlocal asked
        asked += 1
        return real()

    group = _echoing_group()
    monkeypatch.setattr(asyncio, "get_running_loop", counting)
    futures = [group.submit(n) for n in range(10)]
    monkeypatch.undo()
    assert await asyncio.gather(*futures) == list(range(10))
    assert asked == 1


def test_one_group_serves_one_loop_after_another() -> None:
    group = _echoing_group()

    async def burst(first: int) -> list[int]:
        return await asyncio.gather(*(group.submit(n) for n in range(first, first + 3)))

    assert asyncio.run(burst(0)) == [0, 1, 2]
    assert asyncio.run(burst(3)) == [3, 4, 5]
