"""The store's hot path to a standalone Redis: its own connections, commands packed by hiredis,
and exchanges issued in the same turn of the event loop sent together.

Why not plain redis-py commands: on a busy broker each one cost about 100 µs of CPU, most of it
spent on things this store does not need. ``pack_command`` re-joins the whole buffer once per
argument in Python; the pool takes a lock, records observability counters and probes the socket
(``can_read``) on every checkout; and with a ``socket_timeout`` every send runs in a task of its
own (``asyncio.wait_for`` on Python 3.11). Here:

* the command (or a pipeline of them) is packed in C by ``hiredis.pack_command``;
* connections come from a plain free list, not from the client's pool;
* the exchanges that callers start in one turn of the event loop (the admissions of every request
  that arrived together, say) go out as one pipeline: one write, one deadline and, usually, one
  read for the whole batch, instead of a system call pair and a wake-up each. Each exchange's
  commands stay together, in order, and each caller gets exactly its own replies;
* the connections have no socket timeout of their own: one deadline bounds the whole batch
  (connect, send and every reply) with the client's ``socket_timeout``.

Nothing is ever resent. A connection that fails or times out in the middle of a batch is
disconnected before it is reused (its next batch reconnects), and every caller still waiting on
that batch gets the error, so a late reply is never read as the answer to another command, and
a command still queued in a paused Redis is dropped with the connection instead of running later.
A caller that gives up (is cancelled) while its batch is in flight leaves its replies to be read
and dropped: the connection stays in step.

Everything goes through redis-py's own ``Connection`` (connect, HELLO/AUTH/SELECT, TLS, the
hiredis reply parser): only the packing, the batching and the pooling are done here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import hiredis
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import MaxConnectionsError, ResponseError

from broker.deadlines import deadline

__all__ = ["Command", "Wire"]

Command = tuple[str | bytes | int, ...]
"""One Redis command, name first: ``("SET", key, value)``."""

_pack: Callable[[Command], bytes] = hiredis.pack_command  # type: ignore[assignment]
"""Packs one command in C. (hiredis' stub types the argument as a one-element tuple, though it
takes any number, and leaves the result untyped: it is bytes.)"""

_Exchange = tuple[bytes, int, "asyncio.Future[list[Any]]"]
"""One caller's commands, packed; how many replies they get; where the replies go."""


class Wire:
    """Exchanges of one or more pipelined commands over connections of its own.

    Args:
        pool: the client's pool; its connection class and settings are reused (host, port,
            password, TLS, protocol, database, connect timeout, limit on connections), except
            that ``socket_timeout`` bounds each batch as a whole instead of each socket call.
    """

    __slots__ = (
        "_batches",
        "_closed",
        "_idle",
        "_kwargs",
        "_limit",
        "_made",
        "_queued",
        "_timeout",
        "_type",
    )

    def __init__(self, pool: ConnectionPool) -> None:
        kwargs = dict(pool.connection_kwargs)
        self._timeout: float | None = kwargs.get("socket_timeout")
        kwargs["socket_timeout"] = None
        self._kwargs = kwargs
        self._type: type[AbstractConnection] = pool.connection_class
        self._limit: int = pool.max_connections
        self._idle: list[AbstractConnection] = []
        self._made = 0
        self._closed = False
        self._queued: list[_Exchange] = []
        self._batches: set[asyncio.Task[None]] = set()

    async def exchange(self, *commands: Command) -> list[Any]:
        """Send the commands together and read one reply each.

        Error replies (``ResponseError``: NOSCRIPT, OOM, WRONGTYPE...) come back in the list, in
        their place, so the caller sees every reply of a pipeline. Anything else (connection
        refused or reset, the timeout, no connection left) is raised, and the connection is
        disconnected first.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[list[Any]] = loop.create_future()
        packed = _pack(commands[0]) if len(commands) == 1 else b"".join(map(_pack, commands))
        if not self._queued:
            # The first exchange of this turn: what the others add before it runs rides along.
            loop.call_soon(self._flush)
        self._queued.append((packed, len(commands), waiter))
        return await waiter

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        batch = [item for item in queued if not item[2].done()]  # gave up before sending
        if not batch:
            return
        try:
            connection = self._checkout()
        except MaxConnectionsError as exc:
            for _, _, waiter in batch:
                waiter.set_exception(exc)
            return
        task = asyncio.get_running_loop().create_task(self._send(connection, batch))
        self._batches.add(task)  # a reference, so the task is not collected mid-flight
        task.add_done_callback(self._batches.discard)

    async def _send(self, connection: AbstractConnection, batch: list[_Exchange]) -> None:
        try:
            async with self._within():
                packed = batch[0][0] if len(batch) == 1 else b"".join([item[0] for item in batch])
                await connection.send_packed_command(packed, check_health=False)
                for _, count, waiter in batch:
                    replies: list[Any] = []
                    for _ in range(count):
                        try:
                            replies.append(await connection.read_response())
                        except ResponseError as error:  # a whole reply was read: still in step
                            replies.append(error)
                    if not waiter.done():  # its caller may have given up meanwhile
                        waiter.set_result(replies)
        except BaseException as exc:
            await connection.disconnect(nowait=True)
            await self._checkin(connection)
            self._fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        await self._checkin(connection)

    @staticmethod
    def _fail(batch: list[_Exchange], exc: BaseException) -> None:
        """Every caller still waiting on the batch gets its fault (or is cancelled with it)."""
        for _, _, waiter in batch:
            if waiter.done():
                continue
            if isinstance(exc, asyncio.CancelledError):
                waiter.cancel()
            else:
                waiter.set_exception(exc)

    @property
    def connections(self) -> int:
        """How many connections are open or being used (for tests and diagnostics)."""
        return self._made

    def _within(self) -> AbstractAsyncContextManager[None]:
        # deadline(): one shared timer per duration, where asyncio.timeout arms one per call.
        return nullcontext() if self._timeout is None else deadline(self._timeout)

    async def close(self) -> None:
        """Disconnect the idle connections; those in use are disconnected when they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._made -= len(idle)
        for connection in idle:
            await connection.disconnect(nowait=True)

    def _checkout(self) -> AbstractConnection:
        if self._idle:
            return self._idle.pop()
        if self._made >= self._limit:
            raise MaxConnectionsError("too many connections")
        self._made += 1
        return self._type(**self._kwargs)

    async def _checkin(self, connection: AbstractConnection) -> None:
        if self._closed:
            self._made -= 1
            await connection.disconnect(nowait=True)
        else:
            self._idle.append(connection)
