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
        self._head_bytes = 0  # parsed: the request line and the headers so far
        self._head_count = 0
        self._unfinished = 0  # received while the head had not ended (one endless header)
        self._in_head = True
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        in_head_before = self._in_head
        try:
            super().data_received(data)
        except _Refused:
            return
        if in_head_before and self._in_head:  # still no end of headers: the parser buffers it
            self._unfinished += len(data)
            if self._unfinished > self.limits.max_header_bytes:
                self._refuse(
                    431, f"the request's headers exceed {self.limits.max_header_bytes} bytes"
                )

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a parser error of its own; ours were answered already
            super().send_400_response(msg)

    # -- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        if self._head_timer is None:
            self._start_head_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count(len(url), 0)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._count(len(name) + len(value) + 4, 1)  # ": " and CRLF

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = self._head_count = self._unfinished = 0
        self._stop_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # what comes next on this connection is another request's head

    # -- the limits ------------------------------------------------------------------------------

    def _count(self, size: int, headers: int) -> None:
        self._head_bytes += size
        self._head_count += headers
        limits = self.limits
        if self._head_count > limits.max_header_count:
            self._refuse(431, f"more than {limits.max_header_count} request headers")
            raise _Refused
        if self._head_bytes > limits.max_header_bytes:
            self._refuse(431, f"the request's headers exceed {limits.max_header_bytes} bytes")
            raise _Refused

    def _start_head_timer(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._in_head and not self._refused and not self.transport.is_closing():
            timeout = self.limits.header_timeout_s
            self._refuse(408, f"the request's headers did not arrive within {timeout:g}s")

    def _refuse(self, status: int, detail: str) -> None:
        self._refused = True
        self._stop_head_timer()
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
