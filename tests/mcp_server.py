"""A tiny upstream MCP server for the adapter tests: ``python tests/mcp_server.py PORT``.

Streamable HTTP on loopback, with tools whose annotations cover every risk mapping.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
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


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
