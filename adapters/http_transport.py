"""A lean HTTP/1.1 transport for httpx: the ``BROKER_HTTP_CLIENT=http1`` opt-in.

The default client is httpx's own (``adapters.http_client``). This one is kept, as an explicit
opt-in, because its bench says it is worth it: httpcore runs every request through anyio
(cancel scopes, checkpoints, locks) and h11, and in one run of ``bench/bench_http_adapter.py
--http-client httpx,http1`` a proposal calling a loopback backend answered in 0.71 ms at p50 on
this transport and 1.67 ms on httpx's (the pooled client alone: 0.31 ms a call against 1.25 ms).

It keeps httpx's interface (``httpx.Request`` in, ``httpx.Response`` out, httpx's exception
types), so callers and tests see httpx; the broker's own pool skips those two objects and hands
:meth:`Http1Transport.send` the request's bytes. It does only what the broker needs: HTTP/1.1
over asyncio protocols, answers parsed by httptools (llhttp, the parser uvicorn serves with),
keep-alive connections pooled per origin, and connect/pool/read timeouts (``write`` is covered
by ``read``: a request is handed to the socket whole and the answer is awaited under one
deadline).

Left out on purpose: HTTP/2, proxies, ``Expect: 100-continue``, and ``HEAD`` (its answer has a
length but no body, which the parser cannot be told). Answers are read whole, and a connection
whose answer grows past ``max_response_bytes`` is dropped at that point
(:class:`ResponseTooLarge`); the caller caps decoded content again.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Iterable
from typing import Any, cast

import certifi
import httptools
import httpx

__all__ = [
    "Http1Transport",
    "Origin",
    "Reply",
    "ResponseTooLarge",
    "header_lines",
    "message",
    "origin_of",
]

Origin = tuple[str, str, int, str | None]
"""scheme, host (the address to connect to), port, TLS server name."""
Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
"""status, headers, body."""
_Answer = tuple[int, list[tuple[bytes, bytes]], bytes, bool]
"""status, headers, body, whether the connection may carry another request."""

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_UNSAFE_VALUE = re.compile(rb"[\x00\r\n]")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
"""Headers this transport writes itself: a caller's value could disagree with the body."""


class ResponseTooLarge(Exception):
    """The answer's body exceeded the transport's cap; the connection was dropped."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer exceeds {limit} bytes")
        self.limit = limit


class Http1Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive, for one process's outbound calls.

    At most ``max_connections`` requests are in flight at once (a request waits up to its
    ``pool`` timeout for a slot); at most ``max_keepalive`` idle connections are kept, each for
    at most ``keepalive_expiry`` seconds, shorter than common servers' own keep-alive (uvicorn:
    5 s) so a connection is rarely reused just as its server closes it.
    """

    def __init__(
        self,
        *,
        max_connections: int = 200,
        max_keepalive: int = 50,
        keepalive_expiry: float = 4.0,
        max_response_bytes: int = 1_048_576,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        # Built now, not on the first https call: loading the CA certificates takes 40-100 ms,
        # which that call would otherwise pay inside its own deadline.
        self._ssl = ssl_context or ssl.create_default_context(cafile=certifi.where())
        self._slots = asyncio.Semaphore(max_connections)
        self._max_keepalive = max_keepalive
        self._keepalive_expiry = keepalive_expiry
        self._max_response_bytes = max_response_bytes
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        try:
            origin = origin_of(request.url, request.extensions.get("sni_hostname"), request.method)
            body = await _body_of(request)
            start = b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path)
            status, headers, content = await self.send(
                origin,
                message(start, request.headers.raw, body),
                pool=timeouts.get("pool"),
                connect=timeouts.get("connect"),
                read=timeouts.get("read"),
            )
        except httpx.TransportError as exc:
            exc.request = request
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def send(
        self,
        origin: Origin,
        payload: bytes,
        *,
        pool: float | None,
        connect: float | None,
        read: float | None,
    ) -> Reply:
        """One whole request (see :func:`message`) out to ``origin``, its whole answer back.

        What :meth:`handle_async_request` does without httpx's request and response objects
        around it: ``adapters.http.HttpPool`` calls this, as building and reading those cost
        about as much as the exchange itself. Failures are httpx's exception types.
        """
        if self._closed:
            raise RuntimeError("the transport is closed")
        if self._slots.locked():  # only a wait needs a deadline (entering one costs ~2 us)
            try:
                async with asyncio.timeout(pool):
                    await self._slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout("no free connection slot in time") from None
        else:
            await self._slots.acquire()
        try:
            connection = self._reuse(origin)
            if connection is None:
                connection = await self._connect(origin, connect)
            try:
                status, headers, content, reusable = await connection.exchange(payload, read)
            except BaseException:  # timed out, broken, cancelled, too large: half a reply is no use
                connection.close()
                raise
        finally:
            self._slots.release()
        if reusable:
            self._keep(origin, connection)
        else:
            connection.close()
        return status, headers, content

    async def aclose(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        self._idle_count = 0

    async def _connect(self, origin: Origin, within_s: float | None) -> _Connection:
        scheme, host, port, sni = origin
        tls = self._ssl if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(within_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._max_response_bytes),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=(sni or host) if tls is not None else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout("connecting timed out") from None
        except OSError as exc:  # refused, unreachable, TLS failures (ssl.SSLError is an OSError)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return connection

    def _reuse(self, origin: Origin) -> _Connection | None:
        connections = self._idle.get(origin)
        now = time.monotonic()
        while connections:
            connection = connections.pop()  # the most recently used: the least likely closed
            self._idle_count -= 1
            if connection.usable(now - self._keepalive_expiry):
                return connection
            connection.close()
        return None

    def _keep(self, origin: Origin, connection: _Connection) -> None:
        if self._closed:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(connection)
        self._idle_count += 1
        if self._idle_count > self._max_keepalive:
            self._drop_oldest_idle()

    def _drop_oldest_idle(self) -> None:
        origin = min(
            (origin for origin, connections in self._idle.items() if connections),
            key=lambda origin: self._idle[origin][0].idle_since,
        )
        self._idle[origin].pop(0).close()
        self._idle_count -= 1
        if not self._idle[origin]:
            del self._idle[origin]


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request goes out whole, its answer comes back whole."""

    def __init__(self, max_body: int) -> None:
        self.idle_since = 0.0
        self._max_body = max_body
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._waiter: asyncio.Future[_Answer] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._size = 0
        self._headers_done = False
        self._strays = False

    # -- used by the transport -------------------------------------------------------------------

    def exchange(self, payload: bytes, within_s: float | None) -> asyncio.Future[_Answer]:
        """The answer to ``payload``; it fails with ``ReadTimeout`` after ``within_s``."""
        if self._transport is None or self._closed:
            raise httpx.ReadError("the connection is closed")
        self._parser = httptools.HttpResponseParser(self)
        self._headers, self._body, self._size, self._headers_done = [], [], 0, False
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        if within_s is not None:
            # A plain timer on the connection rather than asyncio.timeout around the await:
            # a third of the cost, and nothing to undo in the waiting task when it fires.
            self._timer = loop.call_later(within_s, self._time_out)
        self._transport.write(payload)
        return self._waiter

    def usable(self, idle_after: float) -> bool:
        """Still open, clean, and idle since after ``idle_after`` (a monotonic time)."""
        return (
            not self._closed
            and not self._strays
            and self._transport is not None
            and not self._transport.is_closing()
            and self.idle_since > idle_after
        )

    def close(self) -> None:
        self._closed = True
        self._stop_timer()
        if self._transport is not None:
            self._transport.close()

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's do not subclass asyncio.Transport, hence the cast).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            # Bytes nobody asked for: this connection's framing cannot be trusted any more.
            self._strays = True
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._ends_with_connection():
            self._finish(keep_alive=False)
        elif exc is not None:
            self._fail(httpx.ReadError(f"the connection broke: {exc}"))
        else:
            self._fail(httpx.RemoteProtocolError("the server closed the connection mid-answer"))

    # -- httptools callbacks --------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self._strays = True  # a second answer to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_body:
            self._fail(ResponseTooLarge(self._max_body))
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._parser.get_status_code() < 200:
            # An interim answer (103 Early Hints): the real one follows.
            self._headers, self._headers_done = [], False
            return
        self._finish(keep_alive=self._parser.should_keep_alive())

    def _ends_with_connection(self) -> bool:
        """Whether the answer in progress has no length, so the connection's end is its end.

        Decided only when a connection closes mid-answer: llhttp frames every other answer
        itself, and httptools cannot be told about the end of input.
        """
        if not self._headers_done or self._parser.get_status_code() in (204, 304):
            return False
        return not any(
            name.lower() == b"content-length"
            or (name.lower() == b"transfer-encoding" and b"chunked" in value.lower())
            for name, value in self._headers
        )

    # -- outcomes ---------------------------------------------------------------------------------

    def _finish(self, *, keep_alive: bool) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        self._stop_timer()
        status = self._parser.get_status_code()
        waiter.set_result((status, self._headers, b"".join(self._body), keep_alive))

    def _fail(self, exc: BaseException) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def _time_out(self) -> None:
        self._timer = None
        self._fail(httpx.ReadTimeout("no answer in time"))

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def origin_of(url: httpx.URL, sni: Any = None, method: str = "POST") -> Origin:
    """Where a request to ``url`` connects; ``UnsupportedProtocol`` for what this cannot send."""
    if url.scheme not in _DEFAULT_PORTS:
        raise httpx.UnsupportedProtocol(f"unsupported scheme {url.scheme!r}")
    if method == "HEAD":
        raise httpx.UnsupportedProtocol("HEAD is not supported by this transport")
    if isinstance(sni, bytes):
        sni = sni.decode("ascii")
    return url.scheme, url.host, url.port or _DEFAULT_PORTS[url.scheme], sni


def header_lines(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """``name: value`` lines; refuses names and values that could split the message, and leaves
    out the framing headers (:func:`message` writes ``Content-Length`` itself)."""
    lines = []
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _UNSAFE_VALUE.search(value):
            raise httpx.LocalProtocolError(f"header {name!r} cannot be sent")
        if name.lower() not in _FRAMING:
            lines.append(b"%s: %s\r\n" % (name, value))
    return b"".join(lines)


def message(start: bytes, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A whole request: ``start`` (the request line, and any lines :func:`header_lines` already
    made), ``headers``, and the body, always framed by its length (it goes out whole)."""
    return b"%s%sContent-Length: %d\r\n\r\n%s" % (start, header_lines(headers), len(body), body)


async def _body_of(request: httpx.Request) -> bytes:
    stream = request.stream
    if isinstance(stream, httpx.ByteStream):
        return b"".join(stream)  # already in memory: no need to await anything
    if isinstance(stream, httpx.AsyncByteStream):
        return b"".join([part async for part in stream])
    raise TypeError("the request body must be bytes or an async byte stream")
