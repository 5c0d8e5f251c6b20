"""The MCP front door: the route's tools served to MCP clients at ``/mcp`` (Streamable HTTP)."""

from broker.mcp_front.endpoint import MCP_PATH, McpFrontDoor
from broker.mcp_front.listing import IDEMPOTENCY_ARGUMENT, IDEMPOTENCY_META_KEY, mcp_declaration

__all__ = [
    "IDEMPOTENCY_ARGUMENT",
    "IDEMPOTENCY_META_KEY",
    "MCP_PATH",
    "McpFrontDoor",
    "mcp_declaration",
]
