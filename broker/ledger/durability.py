"""Waiting for fsync: one in flight per file, each covering every byte written before it began.

Appends write to the page cache from the event loop (microseconds) and then wait here for the
bytes to be durable. Keeping the fsync out of the write means the next batch is sealed and
written while the previous one is being synced. Where the fsync runs is the caller's choice: a
child process (``FsyncProcess``, what the file ledger uses under ``"always"``) or, by default,
a worker thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.ledger.errors import LedgerUnavailableError

__all__ = ["Durability"]

_T = TypeVar("_T")


class Durability:
    """Tracks how far one file descriptor is durable and syncs it on demand.

    Args:
        fd: the file written to.
        name: the file's name, for errors.
        synced: called after each fsync that succeeded.
        fsync: makes ``fd`` durable, raising ``OSError`` if it could not; by default
            ``os.fsync`` in a worker thread.
    """

    def __init__(
        self,
        fd: int,
        *,
        name: str,
        synced: Callable[[], None],
        fsync: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._fd = fd
        self._fsync = fsync if fsync is not None else self._fsync_in_thread
        self._name = name
        self._synced = synced
        self._written = 0
        self._durable = 0
        self._waiters: list[tuple[int, asyncio.Future[Any], Any]] = []
        """(end, future, result): resolve future with result once bytes up to end are durable."""
        self._syncing: asyncio.Task[None] | None = None
        self.failed = False
        """The last fsync failed: what was written since the one before may not be durable."""

    def written(self, end: int) -> None:
        """Bytes up to ``end`` are in the page cache."""
        self._written = max(self._written, end)

    async def through(self, end: int) -> None:
        """Return once bytes up to ``end`` are durable.

        Raises:
            LedgerUnavailableError: the fsync meant to cover them failed.
        """
        if self._durable >= end:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.settle_when_durable(future, end, None)
        await future

    def settle_when_durable(self, future: asyncio.Future[_T], end: int, result: _T) -> None:
        """Resolve ``future`` with ``result`` once bytes up to ``end`` are durable, or with the
        ``LedgerUnavailableError`` of the fsync meant to cover them (a cancelled future is
        left alone). What ``through`` awaits, for callers that already have a future."""
        if self._durable >= end:
            future.set_result(result)
            return
        self._waiters.append((end, future, result))
        if self._syncing is None:
            self._syncing = asyncio.create_task(self._sync_waiters())

    async def idle(self) -> None:
        """Wait for the fsync in flight, if any (before the descriptor is closed)."""
        if self._syncing is not None:
            await asyncio.shield(self._syncing)

    async def _sync_waiters(self) -> None:
        try:
            while self._waiters:
                target = self._written
                try:
                    await self._fsync()
                except OSError as exc:
                    self.failed = True
                    error = LedgerUnavailableError(f"ledger {self._name} fsync failed: {exc}")
                    self._settle(target, error)
                    continue
                self.failed = False
                self._durable = max(self._durable, target)
                self._synced()
                self._settle(target, None)
        finally:
            self._syncing = None

    async def _fsync_in_thread(self) -> None:
        # os.fsync looked up at call time, so tests can stand in for the disk.
        await asyncio.to_thread(os.fsync, self._fd)

    def _settle(self, target: int, error: Exception | None) -> None:
        """Resolve every waiter whose bytes the fsync that just ended was meant to cover."""
        still: list[tuple[int, asyncio.Future[Any], Any]] = []
        for waiter in self._waiters:
            end, future, result = waiter
            if end > target:
                still.append(waiter)
            elif not future.done():
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
        self._waiters = still
