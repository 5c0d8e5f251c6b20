"""Every problem with a proposal's body at once, each located by a JSON Pointer.

The strict decoder (``broker.api.proposals``) stops at the first unknown, missing or mistyped
field; an agent that sent a provider-shaped body (``{"name": ..., "arguments": ...}``) would learn
one thing per attempt. Only once that decoder has refused a body does this module read it again
as plain JSON and check it field by field against ``ProposalRequest``: the happy path pays
nothing for it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from broker.model import FieldError, ProposalRequest

__all__ = ["body_problems", "json_pointer_token", "tool_naming_problems"]

_AT = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")

# The proposal's fields and their types, as msgspec declares them (name -> (type, required)).
_FIELDS: dict[str, tuple[Any, bool]] = {
    field.encode_name: (field.type, field.required)
    for field in msgspec.structs.fields(ProposalRequest)
}
# One of the two names the tool; neither is required on its own.
_TOOL_NAMES = ("tool", "tool_id")


class _NonFinite:
    """Marks where a number too large for a double stood."""


def _lenient_float(text: str) -> object:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite()


_lenient = msgspec.json.Decoder(float_hook=_lenient_float)


def json_pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def body_problems(body: bytes) -> list[FieldError]:
    """Every problem with ``body`` as a proposal; empty when it is one.

    Raises:
        msgspec.DecodeError: ``body`` is not JSON at all (the caller's decoder said so first).
    """
    value = _lenient.decode(body)
    if not isinstance(value, dict):
        return [FieldError("", f"expected a JSON object, got {_json_type(value)}")]
    problems = [FieldError(path, "number out of range") for path in _non_finite_paths(value, "")]
    out_of_range = {problem.path for problem in problems}
    for key, item in value.items():
        pointer = "/" + json_pointer_token(key)
        declared = _FIELDS.get(key)
        if declared is None:
            problems.append(FieldError(pointer, f"unknown field {key!r}"))
            continue
        if any(path.startswith(pointer) for path in out_of_range):
            continue  # already located; converting would only repeat it less precisely
        try:
            msgspec.convert(item, declared[0], strict=True)
        except msgspec.ValidationError as exc:
            problems.append(_located(pointer, str(exc)))
    for key, (_, required) in _FIELDS.items():
        if required and key not in value:
            problems.append(FieldError("/" + key, f"missing required field {key!r}"))
    problems += tool_naming_problems(value)
    return sorted(problems, key=lambda problem: problem.path)


def tool_naming_problems(value: dict[str, Any]) -> list[FieldError]:
    """The tool must be named by exactly one of ``tool`` and ``tool_id``."""
    present = [key for key in _TOOL_NAMES if key in value]
    if len(present) == 1:
        return []
    if present:
        return [FieldError("/tool_id", "name the tool by tool or by tool_id, not both")]
    return [FieldError("/tool", "missing required field 'tool' (or name the tool by 'tool_id')")]


def _located(base: str, message: str) -> FieldError:
    """msgspec's ``Expected `str`, got `int` - at `$[1]``` as a problem at ``base/1``."""
    where = _AT.search(message)
    steps = _STEP.findall(where.group(1)) if where else []
    pointer = base + "".join("/" + json_pointer_token(name or index) for name, index in steps)
    return FieldError(pointer, _AT.sub("", message))


def _non_finite_paths(value: object, pointer: str) -> list[str]:
    if isinstance(value, _NonFinite):
        return [pointer]
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _non_finite_paths(item, f"{pointer}/{json_pointer_token(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _non_finite_paths(item, f"{pointer}/{index}")
    return found


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | _NonFinite):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"
