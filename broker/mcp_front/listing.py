"""How a route's tools look to an MCP client: declarations and annotations from risk."""

from __future__ import annotations

from typing import Any

from broker.tools.runtime import ToolRuntime

__all__ = ["IDEMPOTENCY_ARGUMENT", "IDEMPOTENCY_META_KEY", "mcp_declaration"]

IDEMPOTENCY_ARGUMENT = "idempotency_key"
"""The argument a tool whose risk is not ``read`` lists, taken out before its args validate."""

IDEMPOTENCY_META_KEY = "io.action-broker/idempotency_key"
"""Where a client may send the key instead: ``params._meta``."""

_KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "description": (
        "A key naming this one action: sending the same key again returns the first result "
        "instead of acting twice."
    ),
}


def mcp_declaration(tool: ToolRuntime) -> dict[str, Any]:
    """The ``tools/list`` entry of one tool, as plain JSON (wire names)."""
    config = tool.config
    schema = dict(config.input_schema)
    if config.risk != "read":
        schema["properties"] = {**schema.get("properties", {}), IDEMPOTENCY_ARGUMENT: _KEY_SCHEMA}
        schema["required"] = [*schema.get("required", []), IDEMPOTENCY_ARGUMENT]
    return {
        "name": tool.name,
        "description": config.description,
        "inputSchema": schema,
        "annotations": {
            "readOnlyHint": config.risk == "read",
            "destructiveHint": config.risk == "irreversible",
            "idempotentHint": config.idempotent,
        },
    }
