"""Building blocks of the OpenAPI document's responses: media types, headers, problem answers.

Problem statuses, codes and their descriptions are derived from ``broker.taxonomy.CODE_STATUS``,
so the document cannot drift from the taxonomy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from broker.taxonomy import CODE_STATUS, Category, Code

__all__ = [
    "HEADERS",
    "JSON",
    "METRICS_TEXT",
    "PROBLEM_JSON",
    "REF",
    "header_ref",
    "internal",
    "json_answer",
    "problem",
    "ref",
    "store_down",
    "unauthenticated",
]

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"
METRICS_TEXT = "text/plain"
REF = "#/components/schemas/{name}"

_STATUS_TITLE = {
    400: "Bad request",
    401: "Unauthenticated",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    413: "Payload too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal error",
    502: "Provider error",
    503: "Unavailable",
    504: "Timeout",
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def header_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 1},
    },
    "Idempotent-Replayed": {
        "description": (
            "Present (true) when this is the stored answer to an earlier request with the same "
            "idempotency key; the adapter was not called again."
        ),
        "schema": {"type": "string", "enum": ["true"]},
    },
    "Location": {
        "description": "Where the tool is read: /v1/tools/{name}.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "no-store: the answer may carry the tool's signing secret.",
        "schema": {"type": "string", "enum": ["no-store"]},
    },
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with.",
        "schema": {"type": "string", "enum": ["Bearer"]},
    },
}


def _codes_for(status: int) -> list[Code]:
    return [code for code, (_, code_status) in CODE_STATUS.items() if code_status == status]


def _describe(status: int, codes: Sequence[Code], note: str | None) -> str:
    by_category: dict[Category, list[str]] = {}
    for code in codes:
        by_category.setdefault(CODE_STATUS[code][0], []).append(f"`{code.value}`")
    parts = [f"{category.value}: {', '.join(names)}" for category, names in by_category.items()]
    text = f"{_STATUS_TITLE.get(status, str(status))}. " + "; ".join(parts) + "."
    return f"{text} {note}" if note else text


def problem(
    status: int,
    *,
    shape: Sequence[str] = ("ProblemDetails",),
    codes: Sequence[Code] | None = None,
    headers: Iterable[str] = (),
    required_headers: Iterable[str] = (),
    note: str | None = None,
) -> dict[str, Any]:
    """A problem+json response: ``shape`` names the schema(s), ``codes`` default to the status's."""
    codes = list(codes) if codes is not None else _codes_for(status)
    for code in codes:
        if CODE_STATUS[code][1] != status:
            raise ValueError(f"{code.value} answers {CODE_STATUS[code][1]}, not {status}")
    base: dict[str, Any] = ref(shape[0]) if len(shape) == 1 else {"anyOf": [ref(s) for s in shape]}
    schema = {
        "allOf": [
            base,
            {
                "type": "object",
                "properties": {
                    "status": {"const": status},
                    "code": {"enum": [code.value for code in codes]},
                },
            },
        ]
    }
    response: dict[str, Any] = {
        "description": _describe(status, codes, note),
        "content": {PROBLEM_JSON: {"schema": schema}},
    }
    _add_headers(response, headers, required_headers)
    return response


def _add_headers(
    response: dict[str, Any], headers: Iterable[str], required_headers: Iterable[str] = ()
) -> None:
    # A Reference Object cannot carry "required": required headers are written out in full.
    required = list(required_headers)
    names = list(dict.fromkeys([*headers, *required]))
    if names:
        response["headers"] = {
            name: {**HEADERS[name], "required": True} if name in required else header_ref(name)
            for name in names
        }


def json_answer(
    description: str, schema: dict[str, Any], *, headers: Iterable[str] = ()
) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {JSON: {"schema": schema}}}
    _add_headers(response, headers)
    return response


def unauthenticated() -> dict[str, Any]:
    return problem(
        401,
        required_headers=["WWW-Authenticate"],
        note="The bearer token is missing, unknown or expired.",
    )


def internal() -> dict[str, Any]:
    return problem(500)


def store_down(note: str) -> dict[str, Any]:
    return problem(503, codes=[Code.STORE_UNAVAILABLE], headers=["Retry-After"], note=note)
