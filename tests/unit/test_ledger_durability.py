"""Durability: one fsync in flight per file; under load the next one gathers more records."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.ledger.durability import Durability


class GatedFsync:
    """An fsync that records how far the file was written when it began, and waits to be let go."""

    def __init__(self) -> None:
        self.written = 0
        self.began_at: list[int] = []
        self.release = asyncio.Event()

    async def __call__(self) -> None:
        self.began_at.append(self.written)
        await self.release.wait()
        self.release.clear()


def gated(gather_s: float) -> tuple[Durability, GatedFsync]:
    fsync = GatedFsync()
    durability = Durability(0, name="test", synced=lambda: None, fsync=fsync, gather_s=gather_s)
    return durability, fsync


def waiting_for(durability: Durability, fsync: GatedFsync, end: int) -> asyncio.Future[Any]:
    """An append whose bytes end at ``end``: written, then waiting for an fsync to cover it."""
    durability.written(end)
    fsync.written = end
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    durability.settle_when_durable(future, end, end)
    return future


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_an_append_to_an_idle_file_is_synced_at_once() -> None:
    durability, fsync = gated(gather_s=30.0)
    first = waiting_for(durability, fsync, 10)
    await turns()
    assert fsync.began_at == [10]  # no gathering window: nothing else was waiting
    fsync.release.set()
    assert await first == 10

    second = waiting_for(durability, fsync, 20)  # idle again: again at once
    await turns()
    assert fsync.began_at == [10, 20]
    fsync.release.set()
    assert await second == 20


async def test_under_load_the_next_fsync_waits_to_cover_more() -> None:
    durability, fsync = gated(gather_s=0.05)
    first = waiting_for(durability, fsync, 10)
    await turns()
    second = waiting_for(durability, fsync, 20)  # came while the first fsync ran: the file is busy
    fsync.release.set()
    assert await first == 10
    third = waiting_for(durability, fsync, 30)  # within the window: rides on the same fsync
    await turns()
    assert fsync.began_at == [10]
    while len(fsync.began_at) < 2:
        await asyncio.sleep(0.01)
    assert fsync.began_at == [10, 30]
    fsync.release.set()
    assert (await second, await third) == (20, 30)


async def test_without_a_window_the_next_fsync_starts_as_the_last_ends() -> None:
    durability, fsync = gated(gather_s=0.0)
    first = waiting_for(durability, fsync, 10)
    await turns()
    second = waiting_for(durability, fsync, 20)
    fsync.release.set()
    assert await first == 10
    await turns()
    assert fsync.began_at == [10, 20]
    waiting_for(durability, fsync, 30)
    fsync.release.set()
    assert await second == 20
