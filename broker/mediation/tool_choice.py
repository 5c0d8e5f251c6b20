"""``tool_choice`` of a mediated request (``POST /v1/catalog/mediate``), in each provider's shape.

A choice that names a tool follows it: renamed with it, dropped when it was dropped. An
``allowed_tools`` choice keeps the tools that are left (dropped when none is). A choice naming a
tool the request does not declare is the agent's mistake: a problem located in the body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.model import FieldError

__all__ = ["CHOICE_FIXERS", "Rename"]

Rename = Callable[[Any, str], str | None]
"""A declared name (at a pointer) -> the name the provider sees, ``None`` when it was dropped;
an unknown name is recorded as an error by the callee."""

_Fixer = Callable[[Any, Rename, list[FieldError]], Any]
_MODES = ("none", "auto", "required")


def _mode(choice: Any, errors: list[FieldError]) -> str | None:
    """A ``tool_choice`` that is not an object: one of the modes (both OpenAI APIs take them)."""
    if not isinstance(choice, str):
        errors.append(FieldError("/tool_choice", "expected a string or an object"))
        return None
    if choice not in _MODES:
        errors.append(FieldError("/tool_choice", f"expected one of {', '.join(_MODES)}"))
    return choice


def _openai_choice(choice: Any, rename: Rename, errors: list[FieldError]) -> Any:
    if not isinstance(choice, dict):
        return _mode(choice, errors)
    kind = choice.get("type")
    if kind in ("function", "custom"):
        inner = choice.get(kind)
        if not isinstance(inner, dict):
            errors.append(FieldError(f"/tool_choice/{kind}", "expected an object"))
            return None
        name = rename(inner.get("name"), f"/tool_choice/{kind}/name")
        return None if name is None else {**choice, kind: {**inner, "name": name}}
    if kind == "allowed_tools":
        allowed = choice.get("allowed_tools")
        if not isinstance(allowed, dict) or not isinstance(allowed.get("tools"), list):
            errors.append(FieldError("/tool_choice/allowed_tools/tools", "expected a list"))
            return None
        kept = []
        for i, entry in enumerate(allowed["tools"]):
            at = f"/tool_choice/allowed_tools/tools/{i}"
            entry_kind = entry.get("type") if isinstance(entry, dict) else None
            inner = entry.get(entry_kind) if entry_kind in ("function", "custom") else None
            if not isinstance(inner, dict) or not isinstance(entry_kind, str):
                errors.append(FieldError(at, "expected a function or custom tool reference"))
                continue
            name = rename(inner.get("name"), f"{at}/{entry_kind}/name")
            if name is not None:
                kept.append({**entry, entry_kind: {**inner, "name": name}})
        return {**choice, "allowed_tools": {**allowed, "tools": kept}} if kept else None
    errors.append(FieldError("/tool_choice/type", "expected function, custom or allowed_tools"))
    return None


def _responses_choice(choice: Any, rename: Rename, errors: list[FieldError]) -> Any:
    if not isinstance(choice, dict):
        return _mode(choice, errors)
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = rename(choice.get("name"), "/tool_choice/name")
        return None if name is None else {**choice, "name": name}
    if kind == "allowed_tools":
        if not isinstance(choice.get("tools"), list):
            errors.append(FieldError("/tool_choice/tools", "expected a list"))
            return None
        kept = []
        for i, entry in enumerate(choice["tools"]):
            at = f"/tool_choice/tools/{i}"
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                errors.append(FieldError(at, "expected a tool reference (an object with a type)"))
            elif entry.get("type") in ("function", "custom"):
                name = rename(entry.get("name"), f"{at}/name")
                if name is not None:
                    kept.append({**entry, "name": name})
            else:  # a hosted tool, by its type: the provider's, kept as it is
                kept.append(entry)
        return {**choice, "tools": kept} if kept else None
    if isinstance(kind, str):  # a hosted tool (file_search, web_search, mcp, ...): the provider's
        return choice
    errors.append(FieldError("/tool_choice/type", "expected a string"))
    return None


def _anthropic_choice(choice: Any, rename: Rename, errors: list[FieldError]) -> Any:
    if not isinstance(choice, dict):
        errors.append(FieldError("/tool_choice", "expected an object"))
        return None
    kind = choice.get("type")
    if kind == "tool":
        name = rename(choice.get("name"), "/tool_choice/name")
        return None if name is None else {**choice, "name": name}
    if kind not in ("auto", "any", "none"):
        errors.append(FieldError("/tool_choice/type", "expected auto, any, tool or none"))
        return None
    return choice


CHOICE_FIXERS: dict[str, _Fixer] = {
    "openai": _openai_choice,
    "openai-responses": _responses_choice,
    "anthropic": _anthropic_choice,
}
