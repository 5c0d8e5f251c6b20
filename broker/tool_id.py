"""Stable tool ids: ``namespace ":" name ["@" version] ["#" hash8]`` (seeds/004 §1)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = ["format_tool_id", "schema_hash8", "split_namespace"]

_NAMESPACE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def split_namespace(tool_name: str, default: str) -> tuple[str, str]:
    """``ops.restart_service`` -> ``("ops", "restart_service")``; undotted names use ``default``."""
    prefix, dot, rest = tool_name.partition(".")
    if dot and _NAMESPACE.match(prefix):
        return prefix, rest
    return default, tool_name


def schema_hash8(upstream_name: str, input_schema: dict[str, Any]) -> str:
    """First 8 hex of SHA-256 over the name and the schema's shape (property names, required)."""
    shape = {
        "properties": sorted((input_schema.get("properties") or {}).keys()),
        "required": sorted(input_schema.get("required") or []),
    }
    canonical = upstream_name + "\n" + json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def format_tool_id(
    tool_name: str, input_schema: dict[str, Any], *, namespace: str, version: str | None
) -> str:
    ns, name = split_namespace(tool_name, namespace)
    if version:
        return f"{ns}:{name}@{version}"
    return f"{ns}:{name}#{schema_hash8(tool_name, input_schema)}"
