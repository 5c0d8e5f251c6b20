"""The ``mcp`` adapter kind: tools of an upstream MCP server, imported and called through the broker.

Needs the official MCP SDK (the ``mcp`` extra: ``pip install 'action-broker[mcp]'``).

* :class:`McpPool` keeps one client session per upstream URL (streamable HTTP) and per set of
  headers per process: a tenant's calls never share a session with another tenant's, nor with
  calls carrying other credentials. Every request of a session carries ``X-Broker-Tenant`` and
  the tool's ``credential_headers`` (the credentials the operator bound to the tool and tenant,
  exactly as the ``http`` adapter sends them). The SDK's sessions live in anyio task groups,
  which must be left by the task that entered them, so each session is owned by a task of its
  own; calls from request tasks go through it.
* :class:`McpAdapter` executes one tool with ``tools/call``: a result's ``structuredContent`` (or
  a single text block holding a JSON object) is the result; ``isError`` and JSON-RPC errors are
  definite failures; a broken or unreachable session is transient (and is reopened next call).
* :func:`registrations` turns an upstream's ``tools/list`` into registrations for
  ``POST /v1/tools``: names and tool ids per seeds/004 §1, and risk from the annotations
  (``readOnlyHint`` -> ``read``, ``destructiveHint`` -> ``irreversible``, otherwise ``write``;
  ``idempotentHint`` -> ``idempotent``).

Run ``python -m adapters.mcp --upstream http://127.0.0.1:8765/mcp --broker http://127.0.0.1:8080
--token demo-admin-token --route billing_help`` to import an upstream's tools.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from adapters.backend_detail import exception_detail, one_line
from adapters.credentials import credential_headers
from broker.plugins import (
    REGISTERED_NAME,
    AdapterContext,
    Allowlist,
    ProviderError,
    RefusedURL,
    crash_point,
    infer_namespace,
)

__all__ = ["McpAdapter", "McpPool", "main", "registration_for", "registrations"]

log = logging.getLogger("adapters.mcp")

_CONNECT_TIMEOUT_S = 10.0
_SESSION_FAULTS = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT})
"""JSON-RPC codes the SDK raises for a broken session, not for a refused call."""
_TENANT_HEADER = "X-Broker-Tenant"
_TIMEOUTS = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults: a server may hold a response stream open for long."""

_SessionKey = tuple[str, str]
"""The URL and a digest of the headers: credential values are never kept as dict keys."""


def _session_key(url: str, headers: Mapping[str, str]) -> _SessionKey:
    canonical = json.dumps(sorted((k.lower(), v) for k, v in headers.items()))
    return url, hashlib.sha256(canonical.encode()).hexdigest()


class _Session:
    """One open MCP client, owned by the task that opened it, sending ``headers`` with every
    request."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        self.url = url
        self.key = _session_key(url, headers)
        self._headers = dict(headers)
        self.client: Client | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def open(self) -> Client:
        self._task = asyncio.create_task(self._own(), name=f"mcp-session {self.url}")
        try:
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise
        if self.client is None:
            raise self._error or ConnectionError("the MCP session closed while opening")
        return self.client

    async def _own(self) -> None:
        try:
            async with (
                httpx2.AsyncClient(headers=self._headers, timeout=_TIMEOUTS) as http,
                Client(streamable_http_client(self.url, http_client=http)) as client,
            ):
                self.client = client
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:  # kept for open(); the session is simply gone
            self._error = exc
        finally:
            self.client = None
            self._ready.set()

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None and not self._task.done():
            try:
                async with asyncio.timeout(5):
                    await asyncio.shield(self._task)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()


class McpPool:
    """Client sessions to upstream MCP servers, one per URL and set of headers (tenant and
    credentials), shared by every tool of a process."""

    def __init__(self, allowlist: Allowlist) -> None:
        self.allowlist = allowlist
        self._sessions: dict[_SessionKey, _Session] = {}
        self._lock = asyncio.Lock()

    async def call(
        self, url: str, tool: str, args: dict[str, Any], headers: Mapping[str, str] = {}
    ) -> Any:
        session = await self._session(url, headers)
        try:
            if session.client is None:
                raise ConnectionError("the MCP session is closed")
            return await session.client.call_tool(tool, args)
        except MCPError as exc:
            if exc.code in _SESSION_FAULTS:
                await self._drop(session)
            raise
        except (asyncio.CancelledError, TimeoutError):
            raise
        except Exception:
            await self._drop(session)
            raise

    async def list_tools(self, url: str, headers: Mapping[str, str] = {}) -> list[Any]:
        session = await self._session(url, headers)
        if session.client is None:
            raise ConnectionError("the MCP session is closed")
        found: list[Any] = []
        cursor: str | None = None
        for _ in range(100):
            page = await session.client.list_tools(cursor=cursor)
            found.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    async def _session(self, url: str, headers: Mapping[str, str]) -> _Session:
        try:
            await self.allowlist.resolve(url)
        except RefusedURL as exc:
            raise ProviderError("the broker may not call this MCP server", detail=str(exc)) from exc
        key = _session_key(url, headers)
        async with self._lock:
            session = self._sessions.get(key)
            if session is not None and session.alive:
                return session
            session = _Session(url, headers)
            try:
                await session.open()
            except Exception as exc:
                raise ProviderError(
                    "the MCP server could not be reached",
                    retryable=True,
                    unavailable=True,
                    detail=exception_detail(exc),
                ) from exc
            self._sessions[key] = session
            return session

    async def _drop(self, session: _Session) -> None:
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        await session.close()

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


class McpAdapter:
    """One upstream MCP tool, executed with ``tools/call``."""

    forwards_idempotency_key = False
    """MCP has no idempotency key: only tools declared idempotent are retried."""

    def __init__(
        self,
        pool: McpPool,
        *,
        tool: str,
        url: str,
        upstream_tool: str,
        credential_headers: Mapping[str, str] = {},
    ) -> None:
        self._pool = pool
        self._tool = tool
        self._url = url
        self._upstream = upstream_tool
        self._credential_headers = dict(credential_headers)

    def __repr__(self) -> str:
        return f"McpAdapter(tool={self._tool!r}, upstream={self._upstream!r})"

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        headers = {
            _TENANT_HEADER: ctx.tenant,
            **credential_headers(self._tool, self._credential_headers, ctx.credentials),
        }
        try:
            result = await self._pool.call(self._url, self._upstream, args, headers)
            # The upstream ran the tool and answered; the answer is not read yet. (The SDK sends
            # and awaits in one call: this is the first point after the request left.)
            crash_point("after_send")
        except MCPError as exc:
            if exc.code in _SESSION_FAULTS:
                raise ProviderError(
                    f"{self._tool}: the MCP session broke",
                    retryable=True,
                    unavailable=True,
                    detail=one_line(exc.message),
                ) from exc
            raise ProviderError(
                f"{self._tool}: the MCP server refused the call", detail=one_line(exc.message)
            ) from exc
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(
                f"{self._tool}: the MCP session failed",
                retryable=True,
                unavailable=True,
                detail=exception_detail(exc),
            ) from exc
        return _result(self._tool, result)


def _result(tool: str, result: Any) -> dict[str, Any]:
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    if result.is_error:
        # The tool's own words are for the log and the ledger; the agent gets the fixed message.
        reason = one_line(" ".join(texts)) or None
        raise ProviderError(f"{tool}: the tool reported an error", detail=reason)
    if isinstance(result.structured_content, dict):
        return dict(result.structured_content)
    if len(texts) == 1 and len(result.content) == 1:
        try:
            decoded = json.loads(texts[0])
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    return {
        "content": [
            {"type": "text", "text": block.text}
            if getattr(block, "type", None) == "text"
            else {"type": getattr(block, "type", "unknown")}
            for block in result.content
        ]
    }


# -- importing an upstream's tools -----------------------------------------------------------------


def registration_for(
    tool: Any,
    *,
    url: str,
    routes: Sequence[str] = (),
    namespace: str | None = None,
    timeout_s: float = 5.0,
) -> dict[str, Any] | None:
    """A ``POST /v1/tools`` body for one upstream tool, or ``None`` when its name cannot be one."""
    inferred, name = infer_namespace(tool.name)
    if namespace is not None:
        name = tool.name
    broker_name = f"{namespace or inferred}.{name}"
    if not REGISTERED_NAME.fullmatch(broker_name):
        log.warning(
            "skipping MCP tool %r: %r is not a valid broker tool name", tool.name, broker_name
        )
        return None
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    destructive = bool(hints and hints.destructive_hint)
    risk = "read" if read_only else "irreversible" if destructive else "write"
    idempotent = read_only or bool(hints and hints.idempotent_hint and risk != "irreversible")
    meta = tool.meta if isinstance(tool.meta, dict) else {}
    version = meta.get("version")
    body: dict[str, Any] = {
        "name": broker_name,
        "description": (tool.description or tool.title or tool.name).strip()[:2000],
        "input_schema": tool.input_schema,
        "risk": risk,
        "idempotent": idempotent,
        "routes": list(routes),
        "adapter": {"kind": "mcp", "url": url, "tool": tool.name, "timeout_s": timeout_s},
    }
    if isinstance(version, str) and version:
        body["version"] = version
    return body


async def registrations(
    url: str,
    *,
    routes: Sequence[str] = (),
    namespace: str | None = None,
    timeout_s: float = 5.0,
    allowlist: Allowlist | None = None,
) -> list[dict[str, Any]]:
    """Registrations for every tool the upstream MCP server at ``url`` lists."""
    pool = McpPool(allowlist or Allowlist([url]))
    try:
        tools = await pool.list_tools(url)
    finally:
        await pool.aclose()
    found = [
        registration_for(t, url=url, routes=routes, namespace=namespace, timeout_s=timeout_s)
        for t in tools
    ]
    return [body for body in found if body is not None]


async def _import(args: argparse.Namespace) -> int:
    bodies = await registrations(
        args.upstream, routes=args.route, namespace=args.namespace, timeout_s=args.timeout
    )
    failed = 0
    headers = {"Authorization": f"Bearer {args.token}"}
    async with httpx.AsyncClient(base_url=args.broker, timeout=10) as http:
        for body in bodies:
            answer = await http.post("/v1/tools", json=body, headers=headers)
            if answer.status_code >= 300:
                failed += 1
                print(f"{body['name']}: HTTP {answer.status_code} {answer.text}", file=sys.stderr)
            else:
                data = answer.json()
                print(f"{data['name']} ({data['tool_id']}): {body['risk']}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.mcp", description="Register an MCP server's tools with a broker."
    )
    parser.add_argument("--upstream", required=True, help="the MCP server (streamable HTTP) URL")
    parser.add_argument("--broker", default="http://127.0.0.1:8080")
    parser.add_argument("--token", required=True, help="an admin or backend token")
    parser.add_argument("--route", action="append", default=[], help="grant to this route")
    parser.add_argument("--namespace", help="put every tool in this namespace")
    parser.add_argument("--timeout", type=float, default=5.0, help="each tool's timeout_s")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(_import(args))
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
