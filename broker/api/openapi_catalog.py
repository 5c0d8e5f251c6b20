"""The OpenAPI contract of ``POST /v1/catalog/mediate`` (broker/api/catalog.py)."""

from __future__ import annotations

from typing import Any

from broker.api.openapi_contract import Operation
from broker.api.openapi_responses import JSON, internal, json_answer, problem, ref
from broker.api.openapi_responses import unauthenticated as _unauthenticated
from broker.mediation.agent_catalog import MAX_TOOLS, CatalogMediateRequest, MediatedCatalog
from broker.taxonomy import Code

__all__ = ["CATALOG_INPUTS", "CATALOG_OUTPUTS", "catalog_operations", "refine"]

CATALOG_INPUTS = (CatalogMediateRequest,)
CATALOG_OUTPUTS = (MediatedCatalog,)

_EXAMPLE = {
    "format": "openai",
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Look up an order.",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "lookup_order"}},
}


def catalog_operations() -> dict[tuple[str, str], Operation]:
    return {
        ("post", "/v1/catalog/mediate"): Operation(
            request_body={
                "required": True,
                "description": (
                    "format names the provider (openai: Chat Completions; openai-responses; "
                    "anthropic); tools and tool_choice are those of its request, unchanged."
                ),
                "content": {
                    JSON: {
                        "schema": ref("CatalogMediateRequest"),
                        "examples": {"openai": {"summary": "One OpenAI tool", "value": _EXAMPLE}},
                    }
                },
            },
            responses={
                "200": json_answer(
                    "The tools as the route's model may see them, in the request's format, "
                    "tool_choice fixed up, and one receipt per declaration.",
                    ref("MediatedCatalog"),
                ),
                "400": problem(
                    400, codes=[Code.MALFORMED_REQUEST], note="Not JSON, or a repeated key."
                ),
                "401": _unauthenticated(),
                "403": problem(
                    403, codes=[Code.FORBIDDEN], note="Not a route token (admin, backend)."
                ),
                "413": problem(413),
                "415": problem(415, note="The Content-Type is not JSON."),
                "422": problem(
                    422,
                    codes=[Code.SCHEMA_INVALID],
                    note=(
                        "A body, a declaration or a tool_choice that cannot be read, a function "
                        "declared twice, a tool_choice naming a tool the request does not "
                        "declare, or a declaration RFC 8785 cannot hash (an integer past 2**53): "
                        "errors point into it."
                    ),
                ),
                "500": internal(),
            },
        )
    }


_STRING = {"type": "string"}
_NAME = {"type": "string", "minLength": 1}
_NAMED = {"type": "object", "required": ["name"], "properties": {"name": _STRING}}
_OPTIONAL = {"anyOf": [_STRING, {"type": "null"}]}
_SCHEMA = {"anyOf": [{"type": "object"}, {"type": "null"}]}
_MODES = {"enum": ["none", "auto", "required"]}


def _kind(kind: Any) -> dict[str, Any]:
    return {"properties": {"type": {"const": kind}}, "required": ["type"]}


def _typed(function: dict[str, Any], name_in: str | None = None) -> dict[str, Any]:
    """An item with a ``type``: a function declaration when it is ``function``; any other kind
    is named by its ``name`` (``name_in``'s, for Chat's custom tools) or its ``type``."""
    other: dict[str, Any] = {"properties": {"name": _NAME}}
    if name_in is not None:
        other = {"properties": {name_in: {"properties": {"name": _NAME}}}}
    return {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string", "minLength": 1}},
        "if": _kind("function"),
        "then": function,
        "else": other,
    }


def _choice_entry(reference: dict[str, Any], name_in: bool) -> dict[str, Any]:
    """A tool reference in ``allowed_tools``: ``function``/``custom`` name their tool."""

    def named(kind: str) -> dict[str, Any]:
        then = {"required": [kind], "properties": {kind: _NAMED}} if name_in else _NAMED
        return {"if": _kind(kind), "then": then}

    return {**reference, "allOf": [named("function"), named("custom")]}


_TOOLS: dict[str, dict[str, Any]] = {
    "openai": _typed(
        {
            "required": ["function"],
            "properties": {
                "function": {
                    **_NAMED,
                    "properties": {
                        "name": _STRING,
                        "description": _OPTIONAL,
                        "parameters": _SCHEMA,
                    },
                }
            },
        },
        name_in="custom",
    ),
    "openai-responses": _typed(
        {
            **_NAMED,
            "properties": {"name": _STRING, "description": _OPTIONAL, "parameters": _SCHEMA},
        }
    ),
    "anthropic": {
        "type": "object",
        "if": {"anyOf": [{"not": {"required": ["type"]}}, _kind("custom")]},
        "then": {
            "required": ["name", "input_schema"],
            "properties": {
                "name": _STRING,
                "input_schema": {"type": "object"},
                "description": _OPTIONAL,
            },
        },
        "else": {
            "required": ["type"],
            "properties": {"type": {"type": "string", "minLength": 1}, "name": _NAME},
        },
    },
}


def _openai_choice() -> dict[str, Any]:
    entry = _choice_entry(
        {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": ["function", "custom"]}},
        },
        name_in=True,
    )
    allowed = {
        **_kind("allowed_tools"),
        "required": ["type", "allowed_tools"],
        "properties": {
            "type": {"const": "allowed_tools"},
            "allowed_tools": {
                "type": "object",
                "required": ["tools"],
                "properties": {"tools": {"type": "array", "items": entry}},
            },
        },
    }
    named = [
        {
            "type": "object",
            "required": ["type", kind],
            "properties": {"type": {"const": kind}, kind: _NAMED},
        }
        for kind in ("function", "custom")
    ]
    return {"anyOf": [_MODES, {"type": "null"}, *named, {"type": "object", **allowed}]}


def _responses_choice() -> dict[str, Any]:
    entry = _choice_entry(
        {"type": "object", "required": ["type"], "properties": {"type": _STRING}}, name_in=False
    )
    return {
        "anyOf": [
            _MODES,
            {"type": "null"},
            {
                "type": "object",
                "required": ["type"],
                "properties": {"type": _STRING},
                "allOf": [{"if": _kind(kind), "then": _NAMED} for kind in ("function", "custom")]
                + [
                    {
                        "if": _kind("allowed_tools"),
                        "then": {
                            "required": ["tools"],
                            "properties": {"tools": {"type": "array", "items": entry}},
                        },
                    }
                ],
            },
        ]
    }


_CHOICES: dict[str, dict[str, Any]] = {
    "openai": _openai_choice(),
    "openai-responses": _responses_choice(),
    "anthropic": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["auto", "any", "none", "tool"]}},
                "if": _kind("tool"),
                "then": _NAMED,
            },
        ]
    },
}


def refine(schemas: dict[str, Any]) -> None:
    """One variant per format, each with the declarations and ``tool_choice`` its reader takes
    (members it does not read are allowed and passed through), so the document accepts what
    the broker accepts. That a ``tool_choice`` names a declared tool, and that no function is
    declared twice, only the answer's 422 can say."""
    request = schemas["CatalogMediateRequest"]
    variants = []
    for format, items in _TOOLS.items():
        properties = {
            **request["properties"],
            "format": {"const": format},
            "tools": {
                "type": "array",
                "items": items,
                "maxItems": MAX_TOOLS,
                "description": "The request's tools, in its provider's shape.",
            },
            "tool_choice": {
                **_CHOICES[format],
                "description": "The request's tool_choice (absent or null: none).",
            },
        }
        variants.append({**request, "properties": properties})
    schemas["CatalogMediateRequest"] = {
        "title": request["title"],
        "description": request["description"],
        "anyOf": variants,
    }
    answer = schemas["MediatedCatalog"]["properties"]
    answer["tools"]["description"] = "What the provider's tools= takes."
    answer["tool_choice"]["description"] = (
        "The request's tool_choice, renamed with its tool; absent when dropped or not given."
    )
