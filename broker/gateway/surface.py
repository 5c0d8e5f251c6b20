"""The meta-tools a ``gateway`` or ``proxy`` route declares instead of its tools (seed 004 §4).

A ``gateway`` route's model sees four tools, whatever the size of the catalog behind them:
``tool_browse`` (ChoiceCards by query or path), ``tool_hydrate`` (one tool's schema),
``tool_execute`` (a proposal by ``tool_id``) and ``tool_view`` (a part of a result kept aside).
Seed 004 §4.2 lets the gateway hydrate only inside ``tool_execute``; the broker also offers
``tool_hydrate`` there, because a model cannot write arguments for a schema it never saw, and a
first call made only to read the schema from its ``ARGS_INVALID`` would be a proposal in the
ledger that nobody meant.

A ``proxy`` route's model sees one schema-free declaration per tool (§4.1: its id, its card's
description and the sentinel schema ``{"type": "object"}``), then the invocation channel:
``tool_hydrate``, ``tool_execute`` and ``tool_view``.

Every declaration is rendered once per format; the per-route part of a proxy's list is built
once per catalog version (``broker.gateway.catalog``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from broker.native.catalogs import IDEMPOTENCY_ARGUMENT

__all__ = [
    "BROWSE",
    "EXECUTE",
    "HYDRATE",
    "META_TOOLS",
    "SENTINEL_SCHEMA",
    "VIEW",
    "CatalogMode",
    "MetaTool",
    "declare_meta",
    "meta_tools",
]

CatalogMode = Literal["tools", "gateway", "proxy"]

BROWSE = "tool_browse"
HYDRATE = "tool_hydrate"
EXECUTE = "tool_execute"
VIEW = "tool_view"

MAX_QUERY_CHARS = 512
"""A query longer than this is ``ARGS_INVALID`` (``broker.gateway.browsing`` has the same bound,
which its own callers meet)."""

MAX_BROWSE_LIMIT = 50
MAX_SELECTOR_CHARS = 1000

SENTINEL_SCHEMA: dict[str, Any] = {"type": "object"}
"""A proxy card's schema (§4.1): no properties, so a strict client will not call it directly."""

_TOOL_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 240,
    "description": "The tool's id, exactly as a card or tool_browse gave it.",
}


@dataclass(frozen=True, slots=True)
class MetaTool:
    """One meta-tool: its declaration, and whether it may change the world (``tool_execute``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = True


_BROWSE = MetaTool(
    BROWSE,
    "Find tools: give exactly one of query (words for what you want to do; the best matches "
    "first) or path ('/' lists namespaces, '/<namespace>' its tools). Answers small cards: "
    "id, name, description. Use tool_hydrate for a card's argument schema.",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
            "path": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_BROWSE_LIMIT},
        },
        "additionalProperties": False,
    },
)
_HYDRATE = MetaTool(
    HYDRATE,
    "Read one tool's argument schema (input_schema) by its id, before calling tool_execute.",
    {
        "type": "object",
        "properties": {"tool_id": _TOOL_ID},
        "required": ["tool_id"],
        "additionalProperties": False,
    },
)
_VIEW = MetaTool(
    VIEW,
    "Read part of a large tool_execute result that was kept aside: handle is the result's "
    "handle; selector is a JSON Pointer into it ('' for the whole, '/items/0/name'), "
    "optionally ending in a slice of an array or string ('/items[0:20]').",
    {
        "type": "object",
        "properties": {
            "handle": {"type": "string", "minLength": 1, "maxLength": 128},
            "selector": {"type": "string", "maxLength": MAX_SELECTOR_CHARS},
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
)

_EXECUTE_DESCRIPTION = (
    "Call a tool by its id with arguments that match its schema (from tool_hydrate). The call "
    "is checked and recorded like any other; a large result comes back as a handle and a "
    "preview, read further with tool_view."
)


def _execute(*, with_key: bool) -> MetaTool:
    properties: dict[str, Any] = {
        "tool_id": _TOOL_ID,
        "args": {"type": "object", "description": "The tool's arguments."},
    }
    if with_key:
        # MCP's tools/call has no place for an idempotency key but the arguments (as for the
        # tools themselves, broker.native.catalogs); tools that change the world need one.
        properties[IDEMPOTENCY_ARGUMENT] = {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "description": "For a tool that changes the world: a key unique to this action; "
            "resend it to retry safely.",
        }
    return MetaTool(
        EXECUTE,
        _EXECUTE_DESCRIPTION,
        {
            "type": "object",
            "properties": properties,
            "required": ["tool_id", "args"],
            "additionalProperties": False,
        },
        read_only=False,
    )


_EXECUTE = _execute(with_key=False)
_EXECUTE_MCP = _execute(with_key=True)

META_TOOLS = frozenset({BROWSE, HYDRATE, EXECUTE, VIEW})


def meta_tools(mode: CatalogMode, format: str) -> tuple[MetaTool, ...]:
    """The meta-tools a route in ``mode`` declares in ``format`` (none for ``tools``)."""
    execute = _EXECUTE_MCP if format == "mcp" else _EXECUTE
    if mode == "gateway":
        return (_BROWSE, _HYDRATE, execute, _VIEW)
    if mode == "proxy":
        return (_HYDRATE, execute, _VIEW)
    return ()


def _openai(tool: MetaTool) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description}
    return {"type": "function", "function": {**function, "parameters": tool.input_schema}}


def _responses(tool: MetaTool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
        "strict": False,  # as for the tools themselves (broker.native.catalogs)
    }


def _anthropic(tool: MetaTool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def _gemini(tool: MetaTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": tool.input_schema,
    }


def mcp_meta_declaration(tool: MetaTool) -> dict[str, Any]:
    """A meta-tool (or a proxy card) as MCP's ``tools/list`` declares it."""
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": {
            "readOnlyHint": tool.read_only,
            # What tool_execute does depends on the tool it names: assume the worst.
            "destructiveHint": not tool.read_only,
            "idempotentHint": tool.read_only,
        },
    }


_DECLARE: dict[str, Callable[[MetaTool], dict[str, Any]]] = {
    "openai": _openai,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "mcp": mcp_meta_declaration,
}


def declare_meta(tools: Sequence[MetaTool], format: str) -> dict[str, Any]:
    """The ``GET /v1/tools?format=`` answer of a gateway or proxy route: the same
    ``{format, tools, names}`` shape as a ``tools`` route's (no exposed name differs)."""
    declared = [_DECLARE[format](tool) for tool in tools]
    listed: list[Any] = declared
    if format == "gemini":
        listed = [{"functionDeclarations": declared}]
    return {"format": format, "tools": listed, "names": {}}
