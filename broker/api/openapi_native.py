"""The document's part for the native front doors: ``POST /v1/tool-calls`` and the provider
catalogs of ``GET /v1/tools?format=`` (broker/api/tool_calls.py, broker/native/)."""

from __future__ import annotations

from typing import Any

import msgspec

from broker.api.openapi_contract import Operation
from broker.api.openapi_responses import JSON, internal, json_answer, problem, ref
from broker.native.mediation import ToolCallsRequest
from broker.taxonomy import Code

__all__ = [
    "NATIVE_INPUTS",
    "NATIVE_OUTPUTS",
    "ProviderCatalog",
    "ToolCallsAnswer",
    "operations",
    "refine",
    "tools_listing",
]


class ToolCallsAnswer(msgspec.Struct, kw_only=True):
    """A model turn's tool calls, answered: the provider's own result messages, and each call's
    decision exactly as POST /v1/proposals answers it, both in call order."""

    format: str
    results: Any
    decisions: list[dict[str, Any] | None]
    """Each a Decision or a Problem (see :func:`refine`); ``null`` for a gateway meta-tool call
    that is no proposal (``tool_browse``, ``tool_hydrate``, ``tool_view``)."""


class ProviderCatalog(msgspec.Struct, kw_only=True):
    """The route's tools as one provider declares them."""

    format: str
    tools: list[dict[str, Any]]
    names: dict[str, str]


NATIVE_INPUTS: tuple[type[msgspec.Struct], ...] = (ToolCallsRequest,)
NATIVE_OUTPUTS: tuple[type[msgspec.Struct], ...] = (ToolCallsAnswer, ProviderCatalog)

_EXAMPLE = {
    "format": "openai",
    "calls": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_7f2",
                "type": "function",
                "function": {
                    "name": "issue_credit",
                    "arguments": '{"order_id": "O-55291", "amount": 25, "currency": "USD"}',
                },
            }
        ],
    },
    "session_id": "chat-881",
}


def operations() -> dict[tuple[str, str], Operation]:
    return {
        ("post", "/v1/tool-calls"): Operation(
            request_body={
                "required": True,
                "description": (
                    "format names the provider; calls is its payload unchanged: openai, the "
                    "assistant message or its tool_calls; openai-responses, the output item list; "
                    "anthropic, the assistant message or its content list; gemini, a Content or "
                    "its parts. Each call's idempotency key is <format>:<call id> unless "
                    "idempotency_keys maps the call id. At most [service] max_tool_calls calls "
                    "(128 by default)."
                ),
                "content": {
                    JSON: {
                        "schema": ref("ToolCallsRequest"),
                        "examples": {"openai": {"summary": "One OpenAI call", "value": _EXAMPLE}},
                    }
                },
            },
            responses={
                "200": json_answer(
                    "Every call answered in order (a call's rejection or failure is its own error "
                    "result: {error: {category, code, reason, remediation}}).",
                    ref("ToolCallsAnswer"),
                ),
                "400": problem(
                    400, shape=["Problem"], codes=[Code.MALFORMED_REQUEST], note="Not JSON."
                ),
                "401": problem(401, shape=["Problem"], required_headers=["WWW-Authenticate"]),
                "403": problem(
                    403, shape=["Problem"], codes=[Code.FORBIDDEN], note="Admin tokens."
                ),
                "413": problem(413, shape=["Problem"]),
                "415": problem(415, shape=["Problem"], note="The Content-Type is not JSON."),
                "422": problem(
                    422,
                    shape=["Problem"],
                    codes=[Code.SCHEMA_INVALID],
                    note=(
                        "The body as a whole: a wrong format, a payload not of that format, too "
                        "many calls; errors point into it. Nothing ran."
                    ),
                ),
                "500": internal(),
            },
        )
    }


def tools_listing() -> dict[str, Any]:
    """``GET /v1/tools``'s 200: the plain list, or a provider catalog with ``?format=``."""
    return json_answer(
        "The tools this route may call; with ?format=, as that provider's declarations.",
        {"anyOf": [ref("ToolList"), ref("ProviderCatalog")]},
    )


_STRING = {"type": "string"}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


def _typed_items(kind: str, call: dict[str, Any]) -> dict[str, Any]:
    """A list of ``{"type": ...}`` objects whose ``kind`` items are calls (others ignored)."""
    return {
        "type": "array",
        "items": {
            **_object({"type": _STRING}),
            "if": {"properties": {"type": {"const": kind}}},
            "then": call,
        },
    }


_OPENAI_CALL = _object(
    {"id": _STRING, "function": _object({"name": _STRING, "arguments": _STRING})}
)
_OPENAI_CALLS = {"type": "array", "maxItems": 128, "items": _OPENAI_CALL}
_RESPONSES_ITEMS = _typed_items(
    "function_call", _object({"call_id": _STRING, "name": _STRING, "arguments": _STRING})
)
_ANTHROPIC_BLOCKS = _typed_items("tool_use", _object({"id": _STRING, "name": _STRING, "input": {}}))
_GEMINI_CALL = _object(
    {"name": _STRING}, {"args": {}, "id": {"anyOf": [_STRING, {"type": "null"}]}}
)
_GEMINI_PARTS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "functionCall": {"anyOf": [_GEMINI_CALL, {"type": "null"}]},
            "function_call": {"anyOf": [_GEMINI_CALL, {"type": "null"}]},
        },
    },
}
_PAYLOADS: dict[str, dict[str, Any]] = {
    "openai": {
        "anyOf": [
            _OPENAI_CALLS,
            {
                "type": "object",
                "properties": {"tool_calls": {"anyOf": [_OPENAI_CALLS, {"type": "null"}]}},
            },
        ]
    },
    "openai-responses": {"anyOf": [_RESPONSES_ITEMS, _object({"output": _RESPONSES_ITEMS})]},
    "anthropic": {"anyOf": [_ANTHROPIC_BLOCKS, _object({"content": _ANTHROPIC_BLOCKS})]},
    "gemini": {"anyOf": [_GEMINI_PARTS, _object({"parts": _GEMINI_PARTS})]},
}


def refine(schemas: dict[str, Any]) -> None:
    """What msgspec cannot say of these structs (it refuses an untagged union of structs)."""
    answer = schemas["ToolCallsAnswer"]["properties"]
    answer["decisions"]["items"] = {
        "anyOf": [ref("Decision"), ref("Problem"), {"type": "null"}],
        "description": (
            "The call's proposal answer, as POST /v1/proposals answers it; null for a read of a "
            "gateway route's catalog (tool_browse, tool_hydrate, tool_view), which is no proposal."
        ),
    }
    answer["results"]["description"] = (
        "openai and openai-responses: a list of messages or items; anthropic: one user "
        "message; gemini: one user Content."
    )
    # One variant per format, each with exactly the payload its normaliser reads (members it
    # does not read are allowed and ignored), so the document accepts what the broker accepts.
    request = schemas["ToolCallsRequest"]
    variants = []
    for name, payload in _PAYLOADS.items():
        properties = {
            **request["properties"],
            "format": {"const": name},
            "calls": {**payload, "description": "The provider's payload, unchanged."},
        }
        variants.append({**request, "properties": properties})
    schemas["ToolCallsRequest"] = {
        "title": request["title"],
        "description": request["description"],
        "anyOf": variants,
    }
    catalog = schemas["ProviderCatalog"]["properties"]
    catalog["tools"]["description"] = "What the provider SDK's tools= parameter takes."
    catalog["names"]["description"] = (
        "Each exposed name that differs from its tool's name (. is sent as --, - as -_; a name "
        "still over 64 characters is abridged and ends in -h and 7 hex digits)."
    )
