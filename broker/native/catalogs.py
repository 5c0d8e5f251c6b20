"""``GET /v1/tools?format=…``: the route's tools as each provider declares them.

Schemas pass through unchanged. OpenAI and Anthropic take JSON Schema as it is. Gemini's
``parameters`` takes a narrower, OpenAPI 3.0 subset (no ``const``, ``oneOf``, ``allOf``, ``not``,
type arrays, numeric enums, ...), so the broker declares Gemini functions with
``parametersJsonSchema``, which takes JSON Schema: the model sees the whole schema, and the broker
validates every call against it either way.

Each answer is built once per catalog version, token's tool set and format (registrations bump
the version), then served from memory as bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

from broker.mediation.view import Mediator
from broker.model import Principal
from broker.native.names import NameTable, expose_name
from broker.tools.runtime import Registry, ToolRuntime

__all__ = [
    "CATALOG_FORMATS",
    "IDEMPOTENCY_ARGUMENT",
    "CatalogFormat",
    "ProviderCatalogs",
    "declare",
    "mcp_declaration",
]

CatalogFormat = Literal["openai", "openai-responses", "anthropic", "gemini", "mcp"]
CATALOG_FORMATS: tuple[str, ...] = ("openai", "openai-responses", "anthropic", "gemini", "mcp")

_MAX_CACHED = 256
"""Distinct (token tool set, format) answers kept per catalog version."""

IDEMPOTENCY_ARGUMENT = "idempotency_key"


def _openai(tool: ToolRuntime, name: str) -> dict[str, Any]:
    function = {"name": name, "description": tool.config.description}
    return {"type": "function", "function": {**function, "parameters": tool.config.input_schema}}


def _responses(tool: ToolRuntime, name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": tool.config.description,
        "parameters": tool.config.input_schema,
        # Responses defaults to strict, whose schema subset (every property required,
        # additionalProperties false throughout) most tool schemas are not in; the broker
        # validates every call against the whole schema anyway.
        "strict": False,
    }


def _anthropic(tool: ToolRuntime, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": tool.config.description,
        "input_schema": tool.config.input_schema,
    }


def _gemini(tool: ToolRuntime, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": tool.config.description,
        "parametersJsonSchema": tool.config.input_schema,
    }


def mcp_declaration(tool: ToolRuntime, name: str) -> dict[str, Any]:
    """One tool as MCP's ``tools/list`` declares it (also what ``/mcp`` serves)."""
    config = tool.config
    schema = config.input_schema
    if config.risk != "read":
        # A tool that changes the world needs a key, and MCP's tools/call has no place for one
        # but the arguments: the broker takes it out again before validating them.
        schema = {
            **schema,
            "properties": {
                **schema.get("properties", {}),
                IDEMPOTENCY_ARGUMENT: {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 255,
                    "description": "A key unique to this action; resend it to retry safely.",
                },
            },
            "required": [*schema.get("required", []), IDEMPOTENCY_ARGUMENT],
        }
    return {
        "name": name,
        "description": config.description,
        "inputSchema": schema,
        "annotations": {
            "readOnlyHint": config.risk == "read",
            "destructiveHint": config.risk == "irreversible",
            "idempotentHint": config.idempotent,
        },
    }


_DECLARE: dict[str, Callable[[ToolRuntime, str], dict[str, Any]]] = {
    "openai": _openai,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "mcp": mcp_declaration,
}


def declare(tools: Sequence[ToolRuntime], format: str) -> dict[str, Any]:
    """The catalog answer: ``tools`` as ``format`` declares them (what its SDK's ``tools=``
    takes), and ``names``: each exposed name that differs from its tool's name."""
    keep_dots = format == "mcp"
    limit = 128 if keep_dots else 64
    declared = []
    renamed: dict[str, str] = {}
    for tool in tools:
        exposed = expose_name(tool.name, keep_dots=keep_dots, limit=limit)
        if exposed != tool.name:
            renamed[exposed] = tool.name
        declared.append(_DECLARE[format](tool, exposed))
    listed: list[Any] = declared
    if format == "gemini":
        listed = [{"functionDeclarations": declared}]
    return {"format": format, "tools": listed, "names": renamed}


class ProviderCatalogs:
    """Provider-shaped catalogs and the name table, computed once per catalog version."""

    def __init__(self, registry: Registry, mediator: Mediator | None = None) -> None:
        self._registry = registry
        self._mediator = mediator
        self._version = -1
        self._answers: dict[tuple[str, str, tuple[str, ...]], bytes] = {}
        self._names = NameTable(())
        self._encoder = msgspec.json.Encoder()

    def _current(self) -> int:
        version = self._registry.version
        if version != self._version:  # a registration changed the catalog: start afresh
            self._answers = {}
            renames = self._mediator.renames if self._mediator else frozenset()
            self._names = NameTable([*self._registry.tools, *renames])
            self._version = version
        return version

    def names(self) -> NameTable:
        """The table resolving exposed names of the current catalog."""
        self._current()
        return self._names

    def answer(self, principal: Principal, format: str) -> bytes:
        """The encoded ``GET /v1/tools?format=`` answer for what ``principal`` may see."""
        self._current()
        if self._mediator is None:
            tools = self._registry.visible_to(principal)
        else:  # the route's rules: a route's catalog is its own, whatever tools it shares
            tools = self._mediator.visible_to(principal)
        key = (format, principal.route or "", tuple(tool.name for tool in tools))
        found = self._answers.get(key)
        if found is None:
            found = self._encoder.encode(declare(tools, format))
            if len(self._answers) >= _MAX_CACHED:
                self._answers.clear()
            self._answers[key] = found
        return found
