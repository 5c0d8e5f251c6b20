"""A tiny upstream MCP server for the adapter tests: ``python tests/mcp_server.py PORT``.

Streamable HTTP on loopback, with tools whose annotations cover every risk mapping.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("ops-upstream", log_level="WARNING")
calls: dict[str, int] = {}


def _count(name: str) -> int:
    calls[name] = calls.get(name, 0) + 1
    return calls[name]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def get_status(service: str) -> dict[str, Any]:
    """Report whether one service is up."""
    return {"service": service, "status": "up", "call": _count("get_status")}


@server.tool(
    name="ops.restart_service",
    annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True),
)
def restart_service(service: str) -> dict[str, Any]:
    """Restart one service (restarting twice is like restarting once)."""
    return {"restarted": service, "call": _count("restart")}


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def disk_wipe_all(disk: str) -> str:
    """Erase a disk. There is no undo."""
    _count("wipe")
    return f"wiped {disk}"


@server.tool()
def fail_always(reason: str) -> str:
    """Always fails."""
    _count("fail")
    raise ValueError(f"refusing: {reason}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def call_counts() -> dict[str, int]:
    """How often each tool ran."""
    return dict(calls)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> dict[str, Any]:
    """Which client connection called, for which tenant, with which credential (a digest, not
    the value). The protocol is stateless over HTTP (no session id): a client session is told
    apart by the connection its pooled HTTP client keeps open."""
    headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
    key = headers.get("x-api-key")
    peer = getattr(ctx.request_context.request, "client", None)
    return {
        "session": f"{peer.host}:{peer.port}" if peer else None,
        "tenant": headers.get("x-broker-tenant"),
        "api_key_sha256": hashlib.sha256(key.encode()).hexdigest() if key else None,
    }


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
