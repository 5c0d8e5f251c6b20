"""``async with deadline(seconds)``: ``asyncio.timeout`` semantics on one timer per duration.

Every proposal bounds its precondition checks and its adapter call, and ``asyncio.timeout``
arms and cancels an event-loop timer for each, which costs more than a fast in-process adapter
itself. Nearly every deadline here is "now + the tool's timeout", with a handful of distinct
timeouts, so deadlines of one duration expire in the order they were set: they queue in a
deque, and a single timer per duration waits for the oldest live one. Entering costs an append;
leaving pops whatever finished at the front. When a deadline passes, its task is cancelled and
``TimeoutError`` raised at the ``async with``, exactly as ``asyncio.timeout`` does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType
from weakref import WeakKeyDictionary

__all__ = ["deadline"]


class _Deadline:
    __slots__ = ("_cancelling", "_queue", "_task", "done", "expired", "expires_at")

    def __init__(self, queue: _Queue) -> None:
        self._queue = queue
        self.done = False
        self.expired = False

    async def __aenter__(self) -> None:
        queue = self._queue
        task = asyncio.current_task(queue.loop)  # given the loop, it need not look it up again
        if task is None:  # pragma: no cover - asyncio.timeout has the same requirement
            raise RuntimeError("deadline() must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self.expires_at = queue.loop.time() + queue.seconds
        queue.add(self)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.done = True
        self._queue.drop_finished()
        # As asyncio.timeout: our own cancellation becomes TimeoutError, anyone else's stays.
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()


class _Queue:
    """The live deadlines of one duration on one loop, oldest (soonest to expire) first."""

    __slots__ = ("_entries", "_timer", "loop", "seconds")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self.loop = loop
        self.seconds = seconds
        self._entries: deque[_Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, entry: _Deadline) -> None:
        self._entries.append(entry)
        if self._timer is None:
            self._timer = self.loop.call_at(entry.expires_at, self._fire)

    def drop_finished(self) -> None:
        entries = self._entries
        while entries and entries[0].done:
            entries.popleft()

    def _fire(self) -> None:
        self._timer = None
        entries, now = self._entries, self.loop.time()
        while entries:
            head = entries[0]
            if not head.done and head.expires_at > now:
                self._timer = self.loop.call_at(head.expires_at, self._fire)
                return
            entries.popleft()
            if not head.done:
                head.expire()


_queues: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Queue]] = WeakKeyDictionary()
# The loop of the last call and its queues: a process serves on one loop, and looking it up in
# ``_queues`` costs a weak reference per call. Holding this one loop strongly only delays its
# collection until another loop sets a deadline.
_last: tuple[asyncio.AbstractEventLoop | None, dict[float, _Queue]] = (None, {})


def deadline(seconds: float) -> _Deadline:
    """An async context manager raising ``TimeoutError`` if its block runs past ``seconds``."""
    global _last
    loop = asyncio.get_running_loop()
    last_loop, by_duration = _last
    if loop is not last_loop:
        by_duration = _queues.setdefault(loop, {})
        _last = (loop, by_duration)
    queue = by_duration.get(seconds)
    if queue is None:
        queue = by_duration[seconds] = _Queue(loop, seconds)
    return _Deadline(queue)
