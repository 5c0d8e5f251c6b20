"""Argument repair: the few coercions a model's near-miss needs, and none that change meaning.

Routes opt in (``[routes.X] argument_repair = true``). Repair runs only on arguments that failed
the schema, so valid arguments are never touched, and its result is adopted only when the
repaired arguments pass; otherwise the proposal is refused with the errors of what was sent.

What is repaired, each located by a JSON Pointer into the proposal:

* ``string_to_integer`` / ``string_to_number``: a plain decimal string where the schema wants a
  number: ``"12"``, ``"-3"``, ``"12.50"``; ``"12.0"`` becomes an integer only where integral.
  No exponents (``"1e400"``), signs other than ``-``, leading zeros, spaces, ``"NaN"`` or
  locale separators (``"1,5"``): a string that is not unambiguously the number stays as it is.
* ``string_to_boolean``: exactly ``"true"`` or ``"false"``, the JSON literals quoted.
* ``wrap_in_array``: a single value where the schema wants an array of one item type (``items``
  a schema, no ``prefixItems``); ``null`` is never wrapped.
* ``enum_case``: a string that equals exactly one string member of ``enum`` ignoring case.

The walk follows ``properties`` and ``items``, local ``$ref``s (``#/$defs/...``) and an
``anyOf``/``oneOf`` whose branches but one are ``null``; anything else is left as sent.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["Repair", "repair_args"]

# A plain decimal as JSON writes it: no exponent, no "+", no leading zeros, ASCII digits only.
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,39})(?:\.([0-9]{1,40}))?")
_BOOLEANS = {"true": True, "false": False}
_MAX_DEPTH = 32
"""Deeper arguments are left as they are (the schema step refuses what is too deep anyway)."""


class Repair(msgspec.Struct, frozen=True):
    """One coercion applied to a proposal's arguments."""

    path: str
    """RFC 6901 pointer into the proposal, e.g. ``/args/amount``."""
    kind: str
    original: Any
    repaired: Any


def repair_args(schema: dict[str, Any], args: dict[str, Any]) -> tuple[Any, list[Repair]]:
    """The arguments with every safe coercion applied, and what was done (empty: nothing)."""
    found: list[Repair] = []
    repaired = _walk(schema, schema, args, "/args", found, 0)
    return repaired, found


def _walk(
    root: dict[str, Any],
    schema: Any,
    value: Any,
    path: str,
    found: list[Repair],
    depth: int,
) -> Any:
    schema = _resolved(root, schema)
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return value
    kind = _single_type(schema)
    if isinstance(value, str):
        coerced = _from_string(schema, kind, value)
        if coerced is not None:
            found.append(Repair(path, coerced[0], value, coerced[1]))
            return coerced[1]
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict) or "prefixItems" in schema:
            return value
        if value is not None and not isinstance(value, list):
            found.append(Repair(path, "wrap_in_array", value, [value]))
            value = [value]
        if isinstance(value, list):
            return [
                _walk(root, items, item, f"{path}/{i}", found, depth + 1)
                for i, item in enumerate(value)
            ]
        return value
    properties = schema.get("properties")
    if isinstance(value, dict) and isinstance(properties, dict):
        return {
            name: (
                _walk(root, properties[name], item, f"{path}/{_escape(name)}", found, depth + 1)
                if name in properties
                else item
            )
            for name, item in value.items()
        }
    return value


def _from_string(schema: dict[str, Any], kind: str | None, text: str) -> tuple[str, Any] | None:
    """The repair of a string against a schema that does not want this string, if one is safe."""
    members = schema.get("enum")
    if isinstance(members, list):
        if text in members:
            return None
        folded = text.casefold()
        matches = [m for m in members if isinstance(m, str) and m.casefold() == folded]
        if matches:  # two members that differ only in case: ambiguous, so nothing
            return ("enum_case", matches[0]) if len(matches) == 1 else None
    if kind in ("integer", "number"):
        match = _DECIMAL.fullmatch(text)
        if match is None:
            return None
        fraction = match.group(1)
        if kind == "integer":
            if fraction is not None and fraction.strip("0"):
                return None  # "12.5" is not an integer, and rounding would change it
            return "string_to_integer", int(text.partition(".")[0])
        return "string_to_number", float(text) if fraction is not None else int(text)
    if kind == "boolean" and text in _BOOLEANS:
        return "string_to_boolean", _BOOLEANS[text]
    return None


def _single_type(schema: dict[str, Any]) -> str | None:
    """The one type a schema wants (``["integer", "null"]`` wants an integer), else ``None``."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        kinds = [t for t in declared if t != "null"]
        if len(kinds) == 1 and isinstance(kinds[0], str):
            return kinds[0]
    return None


def _resolved(root: dict[str, Any], schema: Any) -> Any:
    """Follow local ``$ref``s and single non-null ``anyOf``/``oneOf`` branches; ``None`` where
    the schema is ambiguous (then nothing below it is repaired)."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(schema, dict):
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str):
            schema = _local(root, ref)
            continue
        branches = schema.get("anyOf", schema.get("oneOf"))
        if isinstance(branches, list):
            others = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(others) != 1 or len(schema) > 1:
                return None  # several ways to read the value, or keywords beside the branches
            schema = others[0]
            continue
        return schema
    return None


def _local(root: dict[str, Any], ref: str) -> Any:
    """``#/$defs/a`` within the tool's own schema; anything else resolves to nothing."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
