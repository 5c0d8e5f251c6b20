"""``/mcp``: authenticate, then hand the request to the SDK's Streamable HTTP session manager.

The bearer token is checked before any MCP message is read, so a caller without one learns
nothing but 401. Each session is bound to the credential that opened it (the SDK answers 404 to
another credential presenting its id), and the principal rides in the ASGI scope to the handlers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
from litestar import Litestar
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from broker.api.shared import BrokerState
from broker.mcp_front.server import PRINCIPAL_SCOPE_KEY, BrokerMcpServer
from broker.responses import problem_fields
from broker.taxonomy import CODE_STATUS, AuthError, Code

__all__ = ["MCP_PATH", "McpFrontDoor"]

MCP_PATH = "/mcp"

_encode = msgspec.json.Encoder().encode


class McpFrontDoor:
    """The MCP server, its session manager, and the route handler that mounts them."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state
        self.server = BrokerMcpServer(state)
        self._sessions = StreamableHTTPSessionManager(
            self.server, session_idle_timeout=state.config.service.mcp_session_idle_s
        )
        self.handler = asgi(MCP_PATH, is_mount=True, copy_scope=False)(self._serve)

    @asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        async with self._sessions.run():
            yield

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
        scope[PRINCIPAL_SCOPE_KEY] = principal  # type: ignore[literal-required]
        # The SDK binds each session to this identity: one route's session is not another's.
        identity = AccessToken(
            token=f"{principal.service_account}:{principal.route}:{principal.tenant}",
            client_id=principal.service_account,
            scopes=[],
            subject=f"{principal.route}/{principal.tenant}",
        )
        scope["user"] = AuthenticatedUser(identity)
        scope["path"] = MCP_PATH  # the SDK serves its one endpoint whatever the mount left
        await self._sessions.handle_request(scope, receive, send)  # type: ignore[arg-type]


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
