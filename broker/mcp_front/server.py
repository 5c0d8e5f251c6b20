"""The MCP server behind ``/mcp``: ``tools/list`` and ``tools/call`` on the official SDK.

Every ``tools/call`` is a proposal through the whole chain, exactly as ``POST /v1/proposals``
would answer it; the MCP session is the proposal's ``session_id``. Sessions that listed tools are
told (``notifications/tools/list_changed``) when their route's catalog changes, whichever process
of a shared store the change came through.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import mcp_types as types
import msgspec
from litestar.types import Receive, Scope, Send
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from broker.api.shared import BrokerState
from broker.approvals.records import pending_content
from broker.gateway.calls import MetaCall
from broker.mcp_front.listing import IDEMPOTENCY_ARGUMENT, IDEMPOTENCY_META_KEY, mcp_declaration
from broker.model import FieldError, Principal, ProposalRequest
from broker.taxonomy import Code

__all__ = ["PRINCIPAL_SCOPE_KEY", "BrokerMcpServer", "Serving", "call_result"]

PRINCIPAL_SCOPE_KEY = "broker.principal"
"""Where the front door leaves the authenticated caller in the ASGI scope."""

_SESSION_HEADER = "mcp-session-id"
_TRACEPARENT_HEADER = "traceparent"
_MAX_WATCHED_SESSIONS = 10_000
_MAX_IDENTITIES = 1_024
_MCP_PATH = "/mcp"

log = logging.getLogger(__name__)
_decode = msgspec.json.Decoder().decode


class Serving:
    """The MCP server and its session manager, run by a task of their own.

    The session manager's task group must be left by the task that entered it, so neither a
    request (which starts it) nor the app's shutdown (which stops it) can own it.
    """

    def __init__(self, server: BrokerMcpServer, sessions: StreamableHTTPSessionManager) -> None:
        self._server = server
        self._sessions = sessions
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._identities: dict[tuple[str, str | None, str | None], AuthenticatedUser] = {}
        """The SDK's identity of each caller, built once (two pydantic models) not per request."""

    @classmethod
    async def start(cls, state: BrokerState) -> Serving:
        server = BrokerMcpServer(state)
        if not state.config.service.tracing:
            # The SDK's own OpenTelemetry middleware: a span per message, priced on every call
            # even with no exporter; the broker's spans cover calls when tracing is on.
            server.middleware.clear()
        sessions = StreamableHTTPSessionManager(
            server,
            # Each answer is one JSON body, not an event stream: a tool call sends nothing
            # before its result. Server notifications still go out on the session's GET stream.
            json_response=True,
            session_idle_timeout=state.config.service.mcp_session_idle_s,
        )
        serving = cls(server, sessions)
        started = asyncio.Event()
        serving._task = asyncio.create_task(serving._run(started))
        await started.wait()
        return serving

    async def _run(self, started: asyncio.Event) -> None:
        async with self._sessions.run():
            started.set()
            await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def handle(
        self, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        scope[PRINCIPAL_SCOPE_KEY] = principal  # type: ignore[literal-required]
        scope["user"] = self._identity(principal)
        scope["path"] = _MCP_PATH  # the SDK serves its one endpoint whatever the mount left
        await self._sessions.handle_request(scope, receive, send)  # type: ignore[arg-type]

    def _identity(self, principal: Principal) -> AuthenticatedUser:
        # The SDK binds each session to this identity: one route's session is not another's.
        key = (principal.service_account, principal.route, principal.tenant)
        user = self._identities.get(key)
        if user is None:
            if len(self._identities) >= _MAX_IDENTITIES:
                self._identities.clear()  # rebuilt on use: only the cost of two models each
            token = AccessToken(
                token=f"{principal.service_account}:{principal.route}:{principal.tenant}",
                client_id=principal.service_account,
                scopes=[],
                subject=f"{principal.route}/{principal.tenant}",
            )
            user = self._identities[key] = AuthenticatedUser(token)
        return user


class _Watched:
    """A session that listed tools: who it is and what it saw, to tell it when that changes."""

    __slots__ = ("names", "principal", "session")

    def __init__(self, principal: Principal, session: Any, names: frozenset[str]) -> None:
        self.principal = principal
        self.session = session
        self.names = names


class BrokerMcpServer(Server[Any]):
    """The broker's tools as an MCP server; one per app."""

    def __init__(self, state: BrokerState) -> None:
        super().__init__(
            "action-broker",
            version="2",
            instructions=(
                "Every tool call is checked (schema, authorization, preconditions, budgets, "
                "rate limits, idempotency) and recorded before it runs. A failed call's result "
                "says what to change in its error's remediation."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._state = state
        self._watched: OrderedDict[str, _Watched] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        state.registry.on_install(self._catalog_changed)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # The catalog changes while clients are connected (registrations), so say we tell them.
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )

    # -- handlers -------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal = _principal(ctx)
        tools = self._state.pipeline.mediator.visible_to(principal)  # the route's rules applied
        session_id = _header(ctx, _SESSION_HEADER)
        if session_id is not None:
            self._watch(session_id, _Watched(principal, ctx.session, _names(tools)))
        gateway = self._state.gateway
        if gateway.serves(principal):  # a gateway or proxy route: its meta-tools (and cards)
            declared = await gateway.catalogs.for_principal(principal).mcp_tools()
        else:
            declared = [mcp_declaration(tool, tool.name) for tool in tools]
        return types.ListToolsResult.model_validate({"tools": declared})

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal = _principal(ctx)
        if self._state.gateway.serves(principal):
            return await self._call_meta_tool(ctx, principal, params)
        args = dict(params.arguments or {})
        key = args.pop(IDEMPOTENCY_ARGUMENT, None)
        if key is None and params.meta:
            key = params.meta.get(IDEMPOTENCY_META_KEY)
        proposal = ProposalRequest(
            tool=params.name,
            args=args,
            idempotency_key=key if isinstance(key, str) else None,
            session_id=_header(ctx, _SESSION_HEADER),
        )
        answer = await self._state.pipeline.propose(
            principal, proposal, header_key=None, traceparent=_header(ctx, _TRACEPARENT_HEADER)
        )
        return call_result(_decode(answer.body))

    async def _call_meta_tool(
        self,
        ctx: ServerRequestContext[Any],
        principal: Principal,
        params: types.CallToolRequestParams,
    ) -> types.CallToolResult:
        """A gateway or proxy route's call: a meta-tool (``broker.gateway.calls``), or the
        refusal of a name the route does not declare, recorded like any refused proposal."""
        gateway = self._state.gateway
        traceparent = _header(ctx, _TRACEPARENT_HEADER)
        if not gateway.offers(principal, params.name):
            detail = (
                f"unknown tool {params.name!r}: this route's tools are called through "
                "tool_execute(tool_id, args)"
            )
            refused = await self._state.pipeline.refuse(
                principal,
                Code.UNKNOWN_TOOL,
                detail,
                errors=[FieldError("", detail)],
                traceparent=traceparent,
            )
            return call_result(_decode(refused.body))
        key = params.meta.get(IDEMPOTENCY_META_KEY) if params.meta else None
        done = await gateway.call(
            principal,
            MetaCall(
                params.name,
                dict(params.arguments or {}),
                session_id=_header(ctx, _SESSION_HEADER),
                idempotency_key=key if isinstance(key, str) else None,
                traceparent=traceparent,
                mcp=True,
            ),
        )
        return _wire_result(done.content, is_error=done.is_error)

    # -- catalog changes ------------------------------------------------------------------

    def _watch(self, session_id: str, watched: _Watched) -> None:
        self._watched[session_id] = watched
        self._watched.move_to_end(session_id)
        while len(self._watched) > _MAX_WATCHED_SESSIONS:
            self._watched.popitem(last=False)

    def _catalog_changed(self) -> None:
        for watched in list(self._watched.values()):
            names = _names(self._state.pipeline.mediator.visible_to(watched.principal))
            if names != watched.names:
                watched.names = names
                self._spawn(watched.session.send_tool_list_changed)

    def _spawn(self, notify: Callable[[], Any]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(_quietly(notify))
        except RuntimeError:  # installed outside the event loop (start-up): nobody listens yet
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _quietly(notify: Callable[[], Any]) -> None:
    # Notifications are advisory: a session that went away must not fail the catalog's refresh.
    try:
        await notify()
    except Exception:
        log.debug("could not tell an MCP session its tools changed", exc_info=True)


def call_result(decision: dict[str, Any]) -> types.CallToolResult:
    """A proposal's answer as a ``CallToolResult``: the result, or an error the model can act on."""
    execution = decision.get("execution") or {}
    content: dict[str, Any]
    if decision.get("decision") == "pending_approval":  # nothing ran: a person decides first
        content = pending_content(decision)
        is_error = True
    elif decision.get("decision") == "approved" and execution.get("status") in (
        "succeeded",
        "dry_run",
    ):
        content = execution.get("result") or {}
        if execution.get("status") == "dry_run":
            content = {"dry_run": True, "preview": execution.get("result")}
        is_error = False
    else:
        error = execution.get("error") or {}
        content = {
            "error": {
                "category": decision.get("category") or error.get("category"),
                "code": decision.get("code") or error.get("code"),
                "reason": decision.get("reason") or error.get("message"),
                "remediation": decision.get("remediation"),
            }
        }
        if decision.get("failed_check") is not None:
            content["error"]["failed_check"] = decision["failed_check"]
        is_error = True
    return _wire_result(content, is_error=is_error)


def _wire_result(content: Any, *, is_error: bool) -> types.CallToolResult:
    """The content as JSON text and as structured data. The SDK's own model, not a dict shaped
    like its dump: the SDK serialises it for each protocol version (2026-07-28 adds
    ``resultType``), which a hand-made dict would have to track."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(content))],
        structured_content=content,
        is_error=is_error,
    )


def _names(tools: list[Any]) -> frozenset[str]:
    return frozenset(tool.name for tool in tools)


def _principal(ctx: ServerRequestContext[Any]) -> Principal:
    request = ctx.request
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY) if request is not None else None
    if not isinstance(principal, Principal):
        # The front door authenticates every request before the SDK sees it.
        raise RuntimeError("an MCP request reached the server without a principal")
    return principal


def _header(ctx: ServerRequestContext[Any], name: str) -> str | None:
    request = ctx.request
    if request is None:
        return None
    value = request.headers.get(name)
    return str(value) if value is not None else None
