"""Group commit: appends racing in one process are sealed and written together, in order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from broker.ledger.errors import LedgerUnavailableError
from broker.quiet_turns import QuietTurns

__all__ = ["GroupCommit"]

_log = logging.getLogger("broker.ledger")

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class GroupCommit(Generic[_In, _Out]):
    """Coalesces concurrent ``submit`` calls: one committer writes everything pending, in order.

    One write (and one fsync, or one Redis round trip) then serves every caller that queued
    while the previous commit ran, which is what keeps throughput up under concurrency without
    weakening what a returned ``append`` promises. The committer is a task of its own, started
    by the first submit of a burst and gone once nothing is pending: callers only wait for
    their own result (a cancelled caller leaves its item to be committed all the same). It
    takes its first batch once the loop stopped queueing more (``broker.quiet_turns``).

    Args:
        commit: writes a batch, returning per item its result or its own exception; raising
            fails the whole batch (``LedgerUnavailableError`` as is, anything else wrapped).
        name: used in log lines and wrapped errors.
        max_batch: cap on items per commit (``None``: no cap).
        deliver: hands a committed item's result to its caller's future; by default at once.
            A sink whose appends must also wait for something else (an fsync) resolves the
            future itself once that is done, so each caller wakes up once, not twice.
    """

    def __init__(
        self,
        commit: Callable[[list[_In]], Awaitable[list[_Out | Exception]]],
        *,
        name: str,
        max_batch: int | None = None,
        deliver: Callable[[asyncio.Future[_Out], _Out], None] | None = None,
    ) -> None:
        self.lock = asyncio.Lock()
        """Held while batches commit; readers take it to see a consistent state."""
        self._commit = commit
        self._name = name
        self._max_batch = max_batch
        self._deliver = deliver if deliver is not None else _set_result
        self._pending: list[tuple[_In, asyncio.Future[_Out]]] = []
        self._committer: asyncio.Task[None] | None = None

    def submit(self, item: _In) -> asyncio.Future[_Out]:
        """Queue ``item``; the future of its result, for the caller to await (a coroutine here
        would only add one more frame to suspend and resume per item)."""
        committer = self._committer
        # While a committer runs, its loop is the caller's: a sink is used from one loop at a
        # time, and the committer's lock and futures belong to that loop anyway. Asking the
        # loop only for the first item of a burst spares each of the others a getpid() call
        # (what asyncio.get_running_loop costs under CPython 3.11).
        loop = committer.get_loop() if committer is not None else asyncio.get_running_loop()
        future: asyncio.Future[_Out] = loop.create_future()
        self._pending.append((item, future))
        if committer is None:
            self._committer = loop.create_task(self._commit_pending())
        return future

    async def _commit_pending(self) -> None:
        try:
            turns = QuietTurns()
            while True:  # one look a turn of the loop: it is the turns that are counted
                if turns.settled(len(self._pending)):
                    break
                await asyncio.sleep(0)
            async with self.lock:
                while self._pending:
                    await self._commit_next()
        finally:
            # No await between the last look at _pending and this (releasing the lock does not
            # suspend): a submit arriving later starts a committer of its own. Cancelled while
            # it waited, the committer is forgotten too, so the next submit starts one.
            self._committer = None

    async def drain(self) -> None:
        """Commit whatever is pending; the caller holds ``lock``."""
        while self._pending:
            await self._commit_next()

    async def _commit_next(self) -> None:
        cut = len(self._pending) if self._max_batch is None else self._max_batch
        batch, self._pending = self._pending[:cut], self._pending[cut:]
        outcomes: list[_Out | Exception]
        try:
            outcomes = await self._commit([item for item, _ in batch])
        except LedgerUnavailableError as exc:
            outcomes = [exc] * len(batch)
        except Exception as exc:  # a bug must not leave the batch's callers waiting forever
            _log.exception("%s: unexpected failure while appending", self._name)
            failure = LedgerUnavailableError(f"{self._name}: append failed: {exc!r}")
            outcomes = [failure] * len(batch)
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                self._deliver(future, outcome)


def _set_result(future: asyncio.Future[_Out], outcome: _Out) -> None:
    future.set_result(outcome)
