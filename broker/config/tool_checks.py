"""Checks of one tool's parts, shared by config tools and tools registered through the API:
its input schema, where its secrets come from, and the headers that carry them.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

from broker.regex_safety import unsafe_pattern_reason

__all__ = [
    "SECRET_SOURCE_HINT",
    "check_credential_headers",
    "check_secret_source",
    "check_tool_schema",
]

SECRET_SOURCE_HINT = 'use "env:VARIABLE" or "file:/path"'
_RESERVED_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "host",
        "idempotency-key",
        "traceparent",
        "tracestate",
        "transfer-encoding",
        "connection",
    }
)
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


def check_secret_source(source: str) -> bool:
    """Whether ``source`` names a secret the broker can read: ``env:VAR`` or ``file:/path``."""
    return bool(re.fullmatch(r"(env:[A-Za-z_][A-Za-z0-9_]*|file:.+)", source))


def check_credential_headers(
    headers: dict[str, str], credential_names: set[str]
) -> list[tuple[str, str]]:
    """Problems with an http adapter's ``credential_headers``, keyed by header name."""
    problems: list[tuple[str, str]] = []
    for header, credential in headers.items():
        lower = header.lower()
        if not _HEADER_NAME.fullmatch(header):
            problems.append((header, "not a valid HTTP header name"))
        elif lower in _RESERVED_HEADERS or lower.startswith("x-broker-"):
            problems.append((header, "the broker sets this header itself"))
        if credential not in credential_names:
            problems.append((header, f"no credential {credential!r} is bound to this tool"))
    return problems


def check_tool_schema(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with a tool's input schema: Draft 2020-12 validity and unsafe regexes."""
    problems: list[tuple[str, str]] = []
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        problems.append((where, f"not a valid Draft 2020-12 schema: {exc.message}"))
        return problems
    if schema.get("type") != "object":
        problems.append(("type", 'a tool\'s input schema must have "type": "object"'))
    for where, pattern in _patterns(schema, ""):
        reason = unsafe_pattern_reason(pattern)
        if reason:
            problems.append((where, f"pattern {pattern!r} refused: {reason}"))
    for where, ref in _refs(schema, ""):
        if not ref.startswith("#"):
            problems.append((where, f"remote $ref {ref!r} is not allowed"))
    return problems


def _patterns(schema: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            here = f"{where}/{key}" if where else str(key)
            if key == "pattern" and isinstance(value, str):
                found.append((here, value))
            elif key == "patternProperties" and isinstance(value, dict):
                found.extend((f"{here}/{p}", p) for p in value)
                for p, sub in value.items():
                    found.extend(_patterns(sub, f"{here}/{p}"))
            else:
                found.extend(_patterns(value, here))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_patterns(item, f"{where}/{index}"))
    return found


def _refs(schema: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            here = f"{where}/{key}" if where else str(key)
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                found.append((here, value))
            else:
                found.extend(_refs(value, here))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_refs(item, f"{where}/{index}"))
    return found
