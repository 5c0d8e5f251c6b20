"""The store's hot path to a standalone Redis: its own connections, commands packed by hiredis.

Why not plain redis-py commands: on a busy broker each one cost about 100 µs of CPU, most of it
spent on things this store does not need. ``pack_command`` re-joins the whole buffer once per
argument in Python; the pool takes a lock, records observability counters and probes the socket
(``can_read``) on every checkout; and with a ``socket_timeout`` every send runs in a task of its
own (``asyncio.wait_for`` on Python 3.11). Here one exchange costs about a third of that:

* the command (or a pipeline of them) is packed in C by ``hiredis.pack_command``;
* connections come from a plain free list, not from the client's pool;
* the connections have no socket timeout of their own: one deadline bounds the whole
  exchange (connect, send and every reply) with the client's ``socket_timeout``.

Nothing is ever resent. A connection that fails or times out in the middle of an exchange is
disconnected before it is reused (its next exchange reconnects), so a late reply is never read
as the answer to another command, and a command still queued in a paused Redis is dropped with
the connection instead of running later.

Everything goes through redis-py's own ``Connection`` (connect, HELLO/AUTH/SELECT, TLS, the
hiredis reply parser): only the packing and the pooling are done here.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, cast

import hiredis
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import MaxConnectionsError, ResponseError

from broker.deadlines import deadline

__all__ = ["Command", "Wire"]

Command = Sequence[str | bytes | int]
"""One Redis command, name first: ``("SET", key, value)``."""


def _pack(command: Command) -> bytes:
    # hiredis' stub types the argument as a one-element tuple (it takes any number) and leaves
    # the result untyped (it is bytes).
    return cast(bytes, hiredis.pack_command(cast(Any, tuple(command))))


class Wire:
    """Exchanges of one or more pipelined commands over connections of its own.

    Args:
        pool: the client's pool; its connection class and settings are reused (host, port,
            password, TLS, protocol, database, connect timeout, limit on connections), except
            that ``socket_timeout`` bounds each exchange as a whole instead of each socket call.
    """

    __slots__ = ("_closed", "_idle", "_kwargs", "_limit", "_made", "_timeout", "_type")

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

    async def exchange(self, *commands: Command) -> list[Any]:
        """Send the commands in one write and read one reply each.

        Error replies (``ResponseError``: NOSCRIPT, OOM, WRONGTYPE...) come back in the list, in
        their place, so the caller sees every reply of a pipeline. Anything else (connection
        refused or reset, the timeout, a cancelled caller) is raised, and the connection is
        disconnected first.
        """
        packed = b"".join([_pack(command) for command in commands])
        connection = self._checkout()
        replies: list[Any] = []
        try:
            async with self._within():
                await connection.send_packed_command(packed, check_health=False)
                for _ in commands:
                    try:
                        replies.append(await connection.read_response())
                    except ResponseError as error:  # a whole reply was read: still in step
                        replies.append(error)
        except BaseException:
            await connection.disconnect(nowait=True)
            await self._checkin(connection)
            raise
        await self._checkin(connection)
        return replies

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
