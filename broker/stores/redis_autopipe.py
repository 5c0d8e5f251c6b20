"""Auto-pipelining on redis-py's public API: the commands that callers issue in one turn of the
event loop go to Redis as one ``pipeline()``.

Why: through redis-py, each command pays for a pool checkout (a lock, observability counters, a
probe of the socket for stray data), packing, a send and a chain of coroutines per reply. A
broker serving many proposals at once issues several store calls per turn of the event loop
(the admissions of the requests that arrived together, the settlements of the calls that
returned together); sent as one pipeline they share one checkout, one write and one deadline.

Semantics, per caller:

* each caller's commands stay together, in order, and it gets exactly its own replies; an error
  reply (``NOSCRIPT``, ``OOM``...) comes back in its place, for that caller alone;
* a fault of the batch as a whole (connection refused or lost, the deadline) reaches every
  caller in it as its own exception; nothing is resent, so a script runs at most once;
* a caller that gives up (is cancelled) before its batch is written withdraws its commands;
  after that, its replies are read and dropped, so the connection stays in step.

The batch runs in a task of its own, so one caller's cancellation never cancels the others'.
Its deadline bounds the whole exchange (checkout, connect, write, every reply); the client it
runs on should have no ``socket_timeout`` of its own (each socket call would then set a timer,
and with Python 3.11 every write would run in a task of its own). On the deadline redis-py closes
the connection in the middle of the exchange, so a late reply is never read as the answer to
someone else's command, and commands still queued in a paused Redis are dropped with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from broker.deadlines import deadline

__all__ = ["AutoPipeline", "Command"]

Command = tuple[str | bytes | int, ...]
"""One Redis command, name first: ``("SET", key, value, "PX", 1000)``."""

_Queued = tuple[tuple[Command, ...], "asyncio.Future[list[Any]]"]


class AutoPipeline:
    """Sends the commands queued in one turn of the event loop as one pipeline.

    Args:
        client: a standalone client; its pool lends each batch one connection.
        timeout: seconds for a batch as a whole (``None``: unbounded).
    """

    __slots__ = ("_client", "_queued", "_running", "_timeout")

    def __init__(self, client: Redis, timeout: float | None) -> None:
        self._client = client
        self._timeout = timeout
        self._queued: list[_Queued] = []
        self._running: set[asyncio.Task[None]] = set()

    def exchange(self, *commands: Command) -> asyncio.Future[list[Any]]:
        """Queue the commands; the future gets one reply each (error replies as exceptions in
        their place) or the batch's fault.

        A plain method returning the future: the caller awaits it, and cancelling it withdraws
        the commands if they are not written yet.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[list[Any]] = loop.create_future()
        if not self._queued:
            # The first call of this turn: the task's first step runs in the next turn, after
            # every caller resumed in this one has queued its commands.
            task = loop.create_task(self._run())
            self._running.add(task)  # a reference, so the task is not collected mid-flight
            task.add_done_callback(self._running.discard)
        self._queued.append((commands, waiter))
        return waiter

    async def _run(self) -> None:
        queued, self._queued = self._queued, []
        batch = [item for item in queued if not item[1].done()]  # gave up before the write
        if not batch:
            return
        pipeline = self._client.pipeline(transaction=False)
        for commands, _ in batch:
            for command in commands:
                pipeline.execute_command(*command)
        try:
            if self._timeout is None:
                replies = await pipeline.execute(raise_on_error=False)
            else:
                async with deadline(self._timeout):
                    replies = await pipeline.execute(raise_on_error=False)
        except BaseException as exc:  # the batch as a whole failed: every caller hears it
            for _, waiter in batch:
                if not waiter.done():
                    if isinstance(exc, asyncio.CancelledError):
                        waiter.cancel()
                    else:
                        waiter.set_exception(_own(exc))
            if not isinstance(exc, Exception):
                raise
            return
        start = 0
        for commands, waiter in batch:
            end = start + len(commands)
            if not waiter.done():  # its caller may have given up meanwhile
                waiter.set_result(replies[start:end])
            start = end

    async def close(self) -> None:
        """Wait for the batches in flight (their callers are waiting for them)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


def _own(exc: BaseException) -> BaseException:
    """A copy of the batch's fault for one caller: raising one exception object from several
    tasks would chain their tracebacks together."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:  # an exception class with another signature: share it
        return exc
    copy.__cause__ = exc
    return copy
