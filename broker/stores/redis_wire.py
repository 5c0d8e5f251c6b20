"""The opt-in path to a standalone Redis (``[service] redis_client = "wire"``): its own
connections, commands packed by hiredis, replies matched to their callers in a protocol callback,
and the exchanges issued in the same turn of the event loop sent together.

It rests on redis-py internals (the connection's handshake and ``_writer``, ``BaseParser``'s
error mapping), so pyproject.toml bounds redis from above; ``bench/bench_redis.py`` measures it
against the default, redis-py's public API, in the same run.

Why not plain redis-py commands: on a busy broker each one cost about 100 µs of CPU, most of it
spent on things this store does not need. ``pack_command`` re-joins the whole buffer once per
argument in Python; the pool takes a lock, records observability counters and probes the socket
(``can_read``) on every checkout; with a ``socket_timeout`` every send runs in a task of its own
(``asyncio.wait_for`` on Python 3.11); and every reply is read through four coroutines
(``read_response``, the parser, ``StreamReader.read``) that format an error message up front.
Here:

* the command (or a pipeline of them) is packed in C by ``hiredis.pack_command``;
* connections come from a plain free list, not from the client's pool;
* the exchanges that callers start in one turn of the event loop (the admissions of every request
  that arrived together, say) go out as one pipeline: one write and one deadline for the whole
  batch, instead of a system call pair and a wake-up each. Each exchange's commands stay
  together, in order, and each caller gets exactly its own replies;
* replies are parsed where the bytes arrive (:meth:`_Link.data_received`, hiredis' reader) and
  handed to their callers there: no task per batch, no coroutine per reply;
* the connections have no socket timeout of their own: one deadline bounds each batch as a whole
  (connect, send and every reply) with the client's ``socket_timeout``.

Nothing is ever resent. A connection that fails or times out in the middle of a batch is closed
at once (unsent bytes dropped) and never reused, and every caller still waiting on that batch
gets the error, so a late reply is never read as the answer to another command, and a command
still queued in a paused Redis is dropped with the connection instead of running later. A caller
that gives up (is cancelled) while its batch is in flight leaves its replies to be read and
dropped: the connection stays in step.

Connections are opened by redis-py's own ``Connection`` (connect, HELLO/AUTH/SELECT, TLS); once it
has finished its handshake, its transport is handed to a :class:`_Link`: only the packing, the
batching, the reply matching and the pooling are done here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import hiredis
from redis._parsers import BaseParser
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, MaxConnectionsError

from broker.deadlines import deadline

__all__ = ["Command", "Wire"]

Command = tuple[str | bytes | int, ...]
"""One Redis command, name first: ``("SET", key, value)``."""

_pack: Callable[[Command], bytes] = hiredis.pack_command  # type: ignore[assignment]
"""Packs one command in C. (hiredis' stub types the argument as a one-element tuple, though it
takes any number, and leaves the result untyped: it is bytes.)"""

_Exchange = tuple[bytes, int, "asyncio.Future[list[Any]]"]
"""One caller's commands, packed; how many replies they get; where the replies go."""

_NOT_YET = object()
"""What hiredis' reader returns while a reply is incomplete (``False`` is a RESP3 reply)."""

_PUSH: type | None = getattr(hiredis, "PushNotification", None)
"""RESP3 out-of-band messages (hiredis >= 3.2): never the answer to a command."""

_CLOSED = "Connection closed by server."


_parse_error: Callable[[str], Exception] = BaseParser.parse_error
"""redis-py's own mapping of error replies (NOSCRIPT -> NoScriptError, LOADING ->
BusyLoadingError...): callers see the exception classes a redis-py command would raise."""


def _fatal(reply: Any) -> RedisConnectionError | None:
    """The fault in a reply that means the connection is unusable (LOADING, an auth failure):
    redis-py raises these instead of returning them, and so does the wire, for the whole batch."""
    if isinstance(reply, list):  # a table (or a RESP3 push): redis-py looks at its first item
        first = reply[0] if reply else None
        return first if isinstance(first, RedisConnectionError) else None
    return reply if isinstance(reply, RedisConnectionError) else None


class _Link(asyncio.Protocol):
    """One connection, after redis-py's handshake: writes a batch, matches replies to callers.

    At most one batch is in flight at a time; when its last reply has been handed out, the link
    calls ``on_idle`` (the wire takes it back). When it fails (connection lost, a fatal reply,
    the batch's deadline), every caller still waiting gets the fault, the transport is aborted,
    and ``on_dead`` is called once.
    """

    def __init__(
        self,
        stream: asyncio.StreamWriter,
        reader: Any,
        timeout: float | None,
        on_idle: Callable[[_Link], None],
        on_dead: Callable[[_Link], None],
    ) -> None:
        # The stream is kept only because dropping it would close the transport (its __del__).
        self._stream = stream
        self._transport = cast(asyncio.Transport, stream.transport)  # a read-write stream's
        self._reader = reader
        self._timeout = timeout
        self._on_idle = on_idle
        self._on_dead = on_dead
        self._loop = asyncio.get_running_loop()
        self._waiting: deque[tuple[int, asyncio.Future[list[Any]]]] = deque()
        self._replies: list[Any] = []
        self._expires_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.dead = False

    @property
    def usable(self) -> bool:
        """Not failed, and not closing (a lost connection is noticed a callback later)."""
        return not self.dead and not self._transport.is_closing()

    def send(self, batch: list[_Exchange], started: float | None = None) -> None:
        """Write the batch; its deadline runs from ``started`` (when its connection was being
        opened for it), else from now."""
        packed = batch[0][0] if len(batch) == 1 else b"".join([item[0] for item in batch])
        self._waiting.extend([(count, waiter) for _, count, waiter in batch])
        if self._timeout is not None:
            self._expires_at = (self._loop.time() if started is None else started) + self._timeout
            if self._timer is None:  # one timer per link, re-armed only when it fires
                self._timer = self._loop.call_at(self._expires_at, self._check_deadline)
        try:
            self._transport.write(packed)
        except (OSError, RuntimeError) as exc:  # closed under us: the batch fails, never hangs
            self._die(RedisConnectionError(f"{_CLOSED} ({exc})"))

    def close(self) -> None:
        """Close an idle link (the wire is closing)."""
        self._die(None)

    # -- protocol callbacks -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        waiting = self._waiting
        while True:
            try:
                reply = self._reader.gets()
            except InvalidResponse as exc:  # garbage on the wire: nothing after it can be trusted
                self._die(exc)
                return
            if reply is _NOT_YET:
                return
            fault = _fatal(reply)
            if fault is not None:
                self._die(fault)
                return
            if _PUSH is not None and isinstance(reply, _PUSH):
                continue
            if not waiting:  # a reply nobody asked for: the connection is out of step
                self._die(InvalidResponse("unexpected reply from Redis"))
                return
            replies = self._replies
            replies.append(reply)
            count, waiter = waiting[0]
            if len(replies) < count:
                continue
            waiting.popleft()
            self._replies = []
            if not waiter.done():  # its caller may have given up meanwhile
                waiter.set_result(replies)
            if not waiting:
                self._on_idle(self)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._die(RedisConnectionError(_CLOSED if exc is None else f"{_CLOSED} ({exc})"))

    # -- failure ---------------------------------------------------------------------------------

    def _check_deadline(self) -> None:
        self._timer = None
        if self.dead or not self._waiting:
            return
        if self._loop.time() >= self._expires_at:
            self._die(TimeoutError(f"no reply from Redis within {self._timeout} s"))
        else:  # a later batch is in flight now: wait for its deadline
            self._timer = self._loop.call_at(self._expires_at, self._check_deadline)

    def _die(self, fault: BaseException | None) -> None:
        if self.dead:
            return
        self.dead = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport.abort()  # unsent bytes are dropped, not sent late
        waiting, self._waiting = self._waiting, deque()
        _fail([waiter for _, waiter in waiting], fault or RedisConnectionError(_CLOSED))
        self._on_dead(self)


def _fail(waiters: list[asyncio.Future[list[Any]]], fault: BaseException) -> None:
    """Every caller still waiting gets the fault (or is cancelled with it)."""
    for waiter in waiters:
        if waiter.done():
            continue
        if isinstance(fault, asyncio.CancelledError):
            waiter.cancel()
        else:
            waiter.set_exception(fault)


class Wire:
    """Exchanges of one or more pipelined commands over connections of its own.

    Args:
        pool: the client's pool; its connection class and settings are reused (host, port,
            password, TLS, protocol, database, connect timeout, limit on connections), except
            that ``socket_timeout`` bounds each batch as a whole instead of each socket call.
    """

    __slots__ = (
        "_closed",
        "_connecting",
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
        self._idle: list[_Link] = []
        self._made = 0
        self._closed = False
        self._queued: list[_Exchange] = []
        self._connecting: set[asyncio.Task[None]] = set()

    def exchange(self, *commands: Command) -> asyncio.Future[list[Any]]:
        """Queue the commands to be sent together; the future gets one reply each.

        Error replies (``ResponseError``: NOSCRIPT, OOM, WRONGTYPE...) come back in the list, in
        their place, so the caller sees every reply of a pipeline. Anything else (connection
        refused or reset, the timeout, no connection left) is raised, and the connection is
        closed first. Cancelling the future withdraws the commands if they are not sent yet.

        A plain method returning the future, not a coroutine: the caller awaits the future
        itself, which spares a coroutine object and one more frame to suspend and resume on
        every exchange (two per proposal).
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[list[Any]] = loop.create_future()
        packed = _pack(commands[0]) if len(commands) == 1 else b"".join(map(_pack, commands))
        if not self._queued:
            # The first exchange of this turn: what the others add before it runs rides along.
            loop.call_soon(self._flush)
        self._queued.append((packed, len(commands), waiter))
        return waiter

    @property
    def connections(self) -> int:
        """How many connections are open or being used (for tests and diagnostics)."""
        return self._made

    async def close(self) -> None:
        """Close the idle connections; those in use are closed when their batch is done."""
        self._closed = True
        idle, self._idle = self._idle, []
        for link in idle:
            link.close()

    # -- batches ---------------------------------------------------------------------------------

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        batch = [item for item in queued if not item[2].done()]  # gave up before sending
        if not batch:
            return
        while self._idle:
            link = self._idle.pop()
            if link.usable:
                link.send(batch)
                return
            link.close()  # lost while idle, its connection_lost not run yet
        if self._made >= self._limit:
            _fail([waiter for _, _, waiter in batch], MaxConnectionsError("too many connections"))
            return
        self._made += 1
        task = asyncio.get_running_loop().create_task(self._open_and_send(batch))
        self._connecting.add(task)  # a reference, so the task is not collected mid-flight
        task.add_done_callback(self._connecting.discard)

    async def _open_and_send(self, batch: list[_Exchange]) -> None:
        started = asyncio.get_running_loop().time()  # one deadline: connect, send, replies
        try:
            link = await self._open()
        except BaseException as exc:
            self._made -= 1
            _fail([waiter for _, _, waiter in batch], exc)
            if not isinstance(exc, Exception):
                raise
            return
        batch = [item for item in batch if not item[2].done()]  # gave up while we connected
        if batch:
            link.send(batch, started)
        else:
            self._link_idle(link)

    async def _open(self) -> _Link:
        """A new connection through redis-py (handshake included), its transport then ours."""
        connection = self._type(**self._kwargs)
        try:
            if self._timeout is None:
                await connection.connect()  # type: ignore[no-untyped-call]
            else:
                async with deadline(self._timeout):
                    await connection.connect()  # type: ignore[no-untyped-call]
        except BaseException:
            await connection.disconnect(nowait=True)
            raise
        # redis-py reads through a StreamReader; from here on the link reads the transport.
        writer = connection._writer  # redis-py's handle on the connected transport
        if writer is None:  # pragma: no cover - connect() returned without a stream
            raise RedisConnectionError("redis-py connected without a transport")
        connection._writer = connection._reader = None  # the link owns it now
        reader = self._reader(connection)
        link = _Link(writer, reader, self._timeout, self._link_idle, self._link_dead)
        writer.transport.set_protocol(link)
        return link

    @staticmethod
    def _reader(connection: AbstractConnection) -> Any:
        encoder = connection.encoder
        options: dict[str, Any] = {
            "protocolError": InvalidResponse,
            "replyError": _parse_error,
            "notEnoughData": _NOT_YET,
        }
        if encoder.decode_responses:
            options.update(encoding=encoder.encoding, errors=encoder.encoding_errors)
        return hiredis.Reader(**options)

    def _link_idle(self, link: _Link) -> None:
        if self._closed:
            link.close()
        else:
            self._idle.append(link)

    def _link_dead(self, link: _Link) -> None:
        self._made -= 1
        if link in self._idle:  # lost while idle (Redis restarted, say)
            self._idle.remove(link)
