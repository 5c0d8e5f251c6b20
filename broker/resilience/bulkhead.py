"""A bulkhead: at most ``limit`` calls in flight to one backend; the rest queue, first come first
served, each for as long as its own deadline allows.

One slow backend then holds at most ``limit`` of the process's tasks and connections, never all
of them. ``asyncio.Semaphore`` is not used: its size cannot change (the lowest ``max_concurrency``
of the tools sharing a backend applies, and a registration can lower it later), and a released
slot is handed straight to the oldest waiter here, so a newcomer cannot overtake the queue.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Bulkhead"]


class Bulkhead:
    __slots__ = ("_waiters", "in_flight", "limit", "rejected")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self.rejected = 0
        """Calls that waited their whole allowance without a slot (a counter, for metrics)."""
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    def try_acquire(self) -> bool:
        """Take a free slot without waiting (nearly every call: no coroutine for it)."""
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return True
        return False

    async def acquire(self, wait_s: float) -> bool:
        """Take a slot, waiting at most ``wait_s``; ``False`` (and counted) when none came."""
        waiters = self._waiters
        while waiters and waiters[0].done():  # given up: they no longer hold their place
            waiters.popleft()
        if self.in_flight < self.limit and not waiters:
            self.in_flight += 1
            return True
        if wait_s <= 0:
            self.rejected += 1
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait_s):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return True  # the slot was handed over just as the wait ran out: keep it
            self.rejected += 1
            return False
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed over, but the caller is gone: pass it on
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
        return True

    def release(self) -> None:
        """Give a slot back: to the oldest live waiter, else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                if self.in_flight > self.limit:  # the limit was lowered: shrink first
                    self._waiters.appendleft(waiter)
                    break
                waiter.set_result(None)  # the slot moves to it; in_flight is unchanged
                return
        self.in_flight -= 1
