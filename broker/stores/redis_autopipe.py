"""Auto-pipelining on redis-py's public API: the commands that callers issue in one turn of the
event loop go to Redis as one write on one pooled connection.

Why: through redis-py, each command pays for a pool checkout (a lock, observability counters, a
probe of the socket for stray data), packing, a send and a chain of coroutines per reply. A
broker serving many proposals at once issues several store calls per turn of the event loop
(the admissions of the requests that arrived together, the settlements of the calls that
returned together); sent together they share one checkout, one write and one deadline.

The batch is exchanged on the pool's connection directly (``ConnectionPool.get_connection``,
``Connection.pack_commands``, ``send_packed_command``, ``read_response``, all public), not
through a ``pipeline()`` object: a pipeline adds, per batch, its own object and reset, a retry
wrapper (the store never retries), observability records and a scan for client-side command
extensions, and per reply a response callback; the store needs none of them (it reads raw
replies), and on a small batch they cost more than the exchange itself.

Semantics, per caller:

* each caller's commands stay together, in order, and it gets exactly its own replies; an error
  reply (``NOSCRIPT``, ``OOM``...) comes back in its place, for that caller alone;
* a fault of the batch as a whole (connection refused or lost, the deadline) reaches every
  caller in it as its own exception; nothing is resent, so a script runs at most once;
* a caller that gives up (is cancelled) before its batch is written withdraws its commands;
  after that, its replies are read and dropped, so the connection stays in step.

Replies are Redis's own (``b"OK"`` for ``SET``, ``b"PONG"`` for ``PING``): no response callback
turns them into Python values.

The batch runs in a task of its own, so one caller's cancellation never cancels the others'.
Its deadline bounds the whole exchange (checkout, connect, write, every reply); the client it
runs on should have no ``socket_timeout`` of its own (each socket call would then set a timer,
and with Python 3.11 every write would run in a task of its own). On a fault or the deadline
the connection is closed in the middle of the exchange, so a late reply is never read as the
answer to someone else's command, and commands still queued in a paused Redis are dropped with
it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import hiredis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError

from broker.deadlines import deadline

__all__ = ["AutoPipeline", "Command"]

Command = tuple[str | bytes | int, ...]
"""One Redis command, name first: ``("SET", key, value, "PX", 1000)``."""

_Queued = tuple[tuple[Command, ...], "asyncio.Future[list[Any]]"]

_pack = cast(Callable[[Command], bytes], hiredis.pack_command)
"""One command in the Redis protocol, by hiredis (what redis-py's own packer calls, without its
argument-by-argument pass in Python). Its stub types the argument as a tuple of one."""


class AutoPipeline:
    """Sends the commands queued in one turn of the event loop as one write.

    Args:
        client: a standalone client; its pool lends each batch one connection.
        timeout: seconds for a batch as a whole (``None``: unbounded).
    """

    __slots__ = ("_idle", "_pool", "_queued", "_running", "_timeout", "_utf8")

    def __init__(self, client: Redis, timeout: float | None) -> None:
        self._pool = client.connection_pool
        self._timeout = timeout
        self._queued: list[_Queued] = []
        self._running: set[asyncio.Task[None]] = set()
        self._idle: list[AbstractConnection] = []
        """Connections taken from the pool and kept between batches (see _exchange)."""
        settings = self._pool.connection_kwargs
        self._utf8 = settings.get("encoding", "utf-8").lower().replace("-", "") == "utf8"
        """hiredis encodes str arguments as UTF-8: other encodings are packed by redis-py."""

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
        commands = [command for own, _ in batch for command in own]
        try:
            if self._timeout is None:
                replies = await self._exchange(commands)
            else:
                async with deadline(self._timeout):
                    replies = await self._exchange(commands)
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
        for own, waiter in batch:
            end = start + len(own)
            if not waiter.done():  # its caller may have given up meanwhile
                waiter.set_result(replies[start:end])
            start = end

    async def _exchange(self, commands: list[Command]) -> list[Any]:
        """One write of every command, then every reply, on one pooled connection; on any fault
        the connection is closed (whatever is still on its socket is never read as a reply)."""
        pool = self._pool
        idle = self._idle
        connection = idle.pop() if idle else await _borrow(pool)
        try:
            # What the pool checks before it lends a connection (connected, nothing unread on
            # it), without the lending itself: kept connections skip its lock and counters.
            await pool.ensure_connection(connection)
            if self._utf8:
                packed: list[bytes] = [b"".join([_pack(command) for command in commands])]
            else:
                packed = connection.pack_commands(commands)
            await connection.send_packed_command(packed, check_health=False)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as exc:  # an error reply: that command's, in its place
                    replies.append(exc)
        except BaseException:
            await connection.disconnect(nowait=True)
            await pool.release(connection)
            raise
        idle.append(connection)
        return replies

    async def close(self) -> None:
        """Wait for the batches in flight (their callers are waiting for them), then give the
        kept connections back to the pool."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        idle, self._idle = self._idle, []
        for connection in idle:
            await self._pool.release(connection)


async def _borrow(pool: ConnectionPool) -> AbstractConnection:
    """A connection from the pool (its ``get_connection`` is untyped: a deprecation wrapper)."""
    get = cast(Callable[[], Awaitable[AbstractConnection]], pool.get_connection)
    return await get()


def _own(exc: BaseException) -> BaseException:
    """A copy of the batch's fault for one caller: raising one exception object from several
    tasks would chain their tracebacks together."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:  # an exception class with another signature: share it
        return exc
    copy.__cause__ = exc
    return copy
