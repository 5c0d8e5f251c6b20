"""Limits on a request's head, enforced while it is parsed: size, header count, and time.

Stock uvicorn (with httptools, its default parser) accepts headers of any size and waits forever
for a request head that never ends (its keep-alive timeout only runs between requests), so one
client could hold memory or a connection without limit. :class:`LimitedHttpToolsProtocol` is
uvicorn's httptools protocol with three checks added through its parser callbacks:

* ``[service] max_header_bytes`` (default 16 KiB, h11's own default): the request line and
  headers together, counted as they arrive, so even one endless header is cut off: 431;
* ``[service] max_header_count`` (default 100): 431;
* ``[service] header_timeout_s`` (default 10 s): from the connection's start, or from the first
  byte of a later request, until the end of its headers: 408, then the connection is closed.

Each refusal is an ``application/problem+json`` answer (``malformed_request``, with the status
above) sent with ``Connection: close``; nothing reaches the app.

Why a subclass and not an ASGI check: by the time the app sees a request, its head has been
read whole (or never arrives). Why limits travel through the environment: with ``workers > 1``
uvicorn starts each worker afresh and passes it the protocol *class* by reference.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, ClassVar

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from broker.model import ProblemDetails
from broker.responses import PROBLEM_JSON, problem_fields
from broker.taxonomy import CODE_STATUS, Code

__all__ = ["LIMITS_ENV", "HttpLimits", "LimitedHttpToolsProtocol", "protocol_for"]

LIMITS_ENV = "BROKER_HTTP_LIMITS"
"""Where ``serve`` leaves the limits for worker processes (JSON of :class:`HttpLimits`)."""

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class HttpLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_header_bytes: int = 16_384
    max_header_count: int = 100
    header_timeout_s: float = 10.0


def _from_environment() -> HttpLimits:
    raw = os.environ.get(LIMITS_ENV)
    return msgspec.json.decode(raw, type=HttpLimits) if raw else HttpLimits()


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request already answered."""


def _problem(status: int, detail: str) -> bytes:
    type_uri, title, _ = problem_fields(Code.MALFORMED_REQUEST)
    body = msgspec.json.encode(
        ProblemDetails(
            type=type_uri,
            title=title,
            status=status,
            detail=detail,
            category=CODE_STATUS[Code.MALFORMED_REQUEST][0].value,
            code=Code.MALFORMED_REQUEST.value,
            errors=[],
        )
    )
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (status, _REASONS[status], PROBLEM_JSON.encode(), len(body))
    )
    return head + body


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of :class:`HttpLimits` (module docstring)."""

    limits: ClassVar[HttpLimits] = _from_environment()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # a request head has begun (or the connection is new), not ended
        self._head_since = 0.0  # when it began, on the loop's clock
        self._head_received = 0  # bytes received while it was unfinished (>= its size so far)
        self._chunk = 0  # the size of the chunk being parsed
        self._refused = False
        self._watch: asyncio.TimerHandle | None = None

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_since = self.loop.time()
        # One timer per connection, re-armed when it fires, never per request: a timer started
        # and cancelled per request cost about 2 us of CPU each.
        self._watch = self.loop.call_later(self.limits.header_timeout_s, self._check_head_time)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._chunk = len(data)
        try:
            super().data_received(data)
        except _Refused:
            return
        if self._in_head:  # the head is still unfinished: the parser holds what came of it
            self._head_received += self._chunk
            if self._head_received > self.limits.max_header_bytes:
                self._refuse(431, self._too_large())

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a parser error of its own; ours were answered already
            super().send_400_response(msg)

    # -- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._in_head:  # a later request on a kept-alive connection
            self._in_head = True
            self._head_since = self.loop.time()

    def on_headers_complete(self) -> None:
        self._in_head = False
        limits = self.limits
        if len(self.headers) > limits.max_header_count:
            self._refuse(431, f"more than {limits.max_header_count} request headers")
            raise _Refused
        # Counted exactly only when the bytes received could hold a head that large.
        if self._head_received + self._chunk > limits.max_header_bytes and (
            len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            > limits.max_header_bytes
        ):
            self._refuse(431, self._too_large())
            raise _Refused
        self._head_received = 0
        super().on_headers_complete()

    # -- the limits ------------------------------------------------------------------------------

    def _too_large(self) -> str:
        return f"the request's headers exceed {self.limits.max_header_bytes} bytes"

    def _check_head_time(self) -> None:
        self._watch = None
        if self._refused or self.transport.is_closing():
            return
        timeout = self.limits.header_timeout_s
        now = self.loop.time()
        if self._in_head and now - self._head_since >= timeout:
            self._refuse(408, f"the request's headers did not arrive within {timeout:g}s")
            return
        wake = self._head_since + timeout if self._in_head else now + timeout
        self._watch = self.loop.call_at(wake, self._check_head_time)

    def _refuse(self, status: int, detail: str) -> None:
        self._refused = True
        self.logger.warning("refused a request head: %s", detail)
        self.transport.write(_problem(status, detail))
        self.transport.close()


def protocol_for(limits: HttpLimits, *, workers: int = 1) -> type[LimitedHttpToolsProtocol]:
    """The protocol class for ``limits``. Worker processes import the class afresh, so for
    ``workers > 1`` the limits go to ``LIMITS_ENV``, where that import reads them."""
    if workers > 1:
        os.environ[LIMITS_ENV] = json.dumps(msgspec.to_builtins(limits))
        return LimitedHttpToolsProtocol
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})
