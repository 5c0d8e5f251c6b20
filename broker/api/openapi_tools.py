"""The OpenAPI contract of tool registration: ``POST /v1/tools``, ``GET`` and ``DELETE
/v1/tools/{name}`` (broker/api/tools.py)."""

from __future__ import annotations

from broker.api.openapi_contract import Operation
from broker.api.openapi_responses import (
    JSON,
    internal,
    json_answer,
    problem,
    ref,
    store_down,
    unauthenticated,
)
from broker.taxonomy import Code

__all__ = ["tool_operations"]


def tool_operations() -> dict[tuple[str, str], Operation]:
    """``POST /v1/tools``, ``GET`` and ``DELETE /v1/tools/{name}`` (broker/api/tools.py)."""
    forbidden = problem(
        403,
        codes=[Code.FORBIDDEN],
        note=(
            "A route token; a backend token outside its namespace; removing a tool defined in "
            "the config."
        ),
    )
    example = {
        "name": "ops.restart_service",
        "description": "Restart one service of the tenant.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["service"],
            "properties": {"service": {"type": "string"}},
        },
        "risk": "write",
        "idempotent": False,
        "preconditions": [],
        "routes": ["billing_help"],
        "adapter": {"kind": "http", "url": "http://127.0.0.1:9000/restart", "timeout_s": 2.0},
        "claims": {"verbs": ["restart", "reboot"], "nouns": ["service"]},
    }
    return {
        ("post", "/v1/tools"): Operation(
            request_body={
                "required": True,
                "description": (
                    "The tool: schema (Draft 2020-12, safe regexes), risk, preconditions "
                    "(existing, or brought as HTTP verifiers), routes to grant it to, adapter "
                    "(an http or mcp URL the broker's http_allowlist allows) and claim words."
                ),
                "content": {
                    JSON: {
                        "schema": ref("Registration"),
                        "examples": {"http": {"summary": "An HTTP tool", "value": example}},
                    }
                },
            },
            responses={
                "200": json_answer(
                    "Replaced; the earlier signing secret is kept unless rotated.",
                    ref("RegistrationAnswer"),
                    headers=["Location", "Cache-Control"],
                ),
                "201": json_answer(
                    "Registered; the answer carries the signing secret, once.",
                    ref("RegistrationAnswer"),
                    headers=["Location", "Cache-Control"],
                ),
                "400": problem(
                    400,
                    codes=[Code.MALFORMED_REQUEST],
                    note="Not JSON, a key repeated, or a query parameter other than rotate_secret.",
                ),
                "401": unauthenticated(),
                "403": forbidden,
                "413": problem(413),
                "415": problem(415, note="The Content-Type is not JSON."),
                "422": problem(
                    422,
                    codes=[Code.SCHEMA_INVALID],
                    note="Every problem with the registration, located by JSON Pointer.",
                ),
                "500": internal(),
                "503": store_down("The store is unreachable; nothing was registered."),
            },
        ),
        ("get", "/v1/tools/{name}"): Operation(
            responses={
                "200": json_answer(
                    "The tool: as registered (never its signing secret), or from the config.",
                    {"anyOf": [ref("RegisteredToolView"), ref("ConfigToolView")]},
                ),
                "401": unauthenticated(),
                "403": forbidden,
                "404": problem(404, note="No such tool."),
                "500": internal(),
                "503": store_down("The store is unreachable."),
            }
        ),
        ("delete", "/v1/tools/{name}"): Operation(
            responses={
                "204": {"description": "Removed: no route can call it any longer."},
                "401": unauthenticated(),
                "403": forbidden,
                "404": problem(404, note="No such registered tool."),
                "500": internal(),
                "503": store_down("The store is unreachable; nothing was removed."),
            }
        ),
    }
