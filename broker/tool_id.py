"""Stable tool ids: ``namespace ":" name ["@" version] ["#" hash8]`` (seeds/004 §1).

A tool keeps its id across restarts and description-only edits: the id is derived from the
namespace, the name and either a declared version or a hash of the input schema's *shape* (its
top-level property names and ``required``), never from prose.

Broker tool names carry their namespace before the first dot (``billing.issue_credit``); config
tools without a dot take their backend's name. Upstream (MCP) names are split by
:func:`infer_namespace`, which keeps the upstream name recoverable.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, NamedTuple

__all__ = [
    "MAX_TOOL_ID_LENGTH",
    "TOOL_ID_PATTERN",
    "ToolIdError",
    "ToolIdParts",
    "format_tool_id",
    "infer_namespace",
    "parse_tool_id",
    "schema_hash8",
    "split_namespace",
    "unparse_tool_id",
]

MAX_TOOL_ID_LENGTH = 240
FALLBACK_NAMESPACE = "mcp"

_NAMESPACE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_TOOL_ID = re.compile(
    r"^(?P<namespace>[a-z][a-z0-9_-]{0,63})"
    r":(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127})"
    r"(?:@(?P<version>[A-Za-z0-9._-]{1,32}))?"
    r"(?:#(?P<hash8>[0-9a-f]{8}))?$"
)
TOOL_ID_PATTERN = (
    r"^[a-z][a-z0-9_-]{0,63}:[A-Za-z_][A-Za-z0-9_.-]{0,127}"
    r"(?:@[A-Za-z0-9._-]{1,32}(?:#[0-9a-f]{8})?|#[0-9a-f]{8})$"
)
"""What :func:`parse_tool_id` accepts, as one ECMA-262 regex (the OpenAPI document's): a
version, a hash or both."""


class ToolIdError(ValueError):
    """A malformed tool id, or two tools that would share one."""


class ToolIdParts(NamedTuple):
    namespace: str
    name: str
    version: str | None = None
    hash8: str | None = None


def parse_tool_id(tool_id: object) -> ToolIdParts:
    """Split a tool id into its parts.

    Raises:
        ToolIdError: ``tool_id`` is not a string, does not follow the grammar, or has neither a
            version nor a hash (seeds/004 §1.3: without a version the hash is required, so
            ``ns:name`` alone identifies no particular shape of the tool).
    """
    if not isinstance(tool_id, str):
        raise ToolIdError(f"a tool id is a string, not {type(tool_id).__name__}")
    match = _TOOL_ID.fullmatch(tool_id) if len(tool_id) <= MAX_TOOL_ID_LENGTH else None
    if match is None:
        raise ToolIdError(f"not a tool id: {tool_id!r}")
    if not match["version"] and not match["hash8"]:
        raise ToolIdError(f"tool id {tool_id!r} has neither @version nor #hash8")
    return ToolIdParts(
        match["namespace"], match["name"], match["version"] or None, match["hash8"] or None
    )


def unparse_tool_id(parts: ToolIdParts) -> str:
    """The inverse of :func:`parse_tool_id` (checked against the grammar)."""
    text = f"{parts.namespace}:{parts.name}"
    if parts.version:
        text += f"@{parts.version}"
    if parts.hash8:
        text += f"#{parts.hash8}"
    parse_tool_id(text)
    return text


def split_namespace(tool_name: str, default: str) -> tuple[str, str]:
    """``ops.restart_service`` -> ``("ops", "restart_service")``; undotted names use ``default``."""
    prefix, dot, rest = tool_name.partition(".")
    if dot and _NAMESPACE.fullmatch(prefix):
        return prefix, rest
    return default, tool_name


def infer_namespace(upstream_name: str) -> tuple[str, str]:
    """Namespace and name of an upstream tool (seeds/004 §1.4).

    A dot or slash splits the name (``github.create_issue`` -> ``github``, ``create_issue``); an
    underscore name of three or more segments lends its first segment as the namespace but keeps
    the whole name (``slack_send_message`` -> ``slack``, ``slack_send_message``); anything else
    falls back to the ``mcp`` namespace with the name as it is.
    """
    for sep in (".", "/"):
        prefix, found, rest = upstream_name.partition(sep)
        if found and rest and _NAMESPACE.fullmatch(prefix.lower()):
            return prefix.lower(), rest.replace("/", ".")
    segments = upstream_name.split("_")
    if len(segments) >= 3 and _NAMESPACE.fullmatch(segments[0].lower()):
        return segments[0].lower(), upstream_name
    return FALLBACK_NAMESPACE, upstream_name


def schema_hash8(upstream_name: str, input_schema: dict[str, Any]) -> str:
    """First 8 hex of SHA-256 over the name and the schema's shape (property names, required)."""
    properties = input_schema.get("properties")
    required = input_schema.get("required")
    shape = {
        "properties": sorted(properties.keys() if isinstance(properties, dict) else ()),
        "required": sorted(required if isinstance(required, list) else ()),
    }
    canonical = upstream_name + "\n" + json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def format_tool_id(
    tool_name: str,
    input_schema: dict[str, Any],
    *,
    namespace: str,
    version: str | None,
    upstream_name: str | None = None,
) -> str:
    """The id of a broker tool.

    Args:
        tool_name: the broker's name for the tool; a dotted prefix is its namespace.
        namespace: used when ``tool_name`` has no namespace prefix (config tools: the backend).
        version: a declared version gives ``ns:name@version``; otherwise ``ns:name#hash8``.
        upstream_name: the name the hash is taken over, when the tool mirrors an upstream one
            (an MCP tool); defaults to ``tool_name``.
    """
    ns, name = split_namespace(tool_name, namespace)
    if version:
        return f"{ns}:{name}@{version}"
    return f"{ns}:{name}#{schema_hash8(upstream_name or tool_name, input_schema)}"
