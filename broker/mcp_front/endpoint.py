"""``/mcp``: authenticate, then hand the request to the SDK's Streamable HTTP session manager.

The bearer token is checked before any MCP message is read, so a caller without one learns
nothing but 401. Each session is bound to the credential that opened it (the SDK answers 404 to
another credential presenting its id), and the principal rides in the ASGI scope to the handlers.

The SDK is imported on the first request to ``/mcp``, in a thread: it costs about as much as the
rest of the broker's start-up, which processes that never serve MCP should not pay.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from litestar import Litestar
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send

from broker.api.shared import BrokerState
from broker.responses import problem_fields
from broker.taxonomy import CODE_STATUS, AuthError, Code

__all__ = ["MCP_PATH", "McpFrontDoor"]

MCP_PATH = "/mcp"

_encode = msgspec.json.Encoder().encode


class McpFrontDoor:
    """The route handler for ``/mcp`` and the lifetime of the MCP server behind it."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state
        self._serving: Any = None
        """``broker.mcp_front.server.Serving`` once the first request started it."""
        self._starting = asyncio.Lock()
        self.handler = asgi(MCP_PATH, is_mount=True, copy_scope=False)(self._serve)

    @asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._serving is not None:
                await self._serving.stop()

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization = _first_header(scope, b"authorization")
        try:
            principal = self._state.authenticator.authenticate(authorization)
        except AuthError as exc:
            await _problem(send, exc.code, exc.detail, {"www-authenticate": "Bearer"})
            return
        if principal.route is None:
            await _problem(send, Code.FORBIDDEN, "only a route token may use /mcp", {})
            return
        serving = self._serving or await self._start()
        await serving.handle(principal, scope, receive, send)

    async def _start(self) -> Any:
        async with self._starting:
            if self._serving is None:
                server = await asyncio.to_thread(importlib.import_module, "broker.mcp_front.server")
                self._serving = await server.Serving.start(self._state)
        return self._serving


def _first_header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def _problem(send: Send, code: Code, detail: str, headers: dict[str, str]) -> None:
    kind, title, status = problem_fields(code)
    body = _encode(
        {
            "type": kind,
            "title": title,
            "status": status,
            "detail": detail,
            "category": CODE_STATUS[code][0].value,
            "code": code.value,
        }
    )
    raw = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw += [(name.encode(), value.encode()) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})
