"""A proposal's body: decoded strictly, or why it is not a proposal, each problem located by a
JSON Pointer.

:func:`decode_proposal` is the one strict decoding. It stops at the first unknown, missing or
mistyped field, and an agent that sent a provider-shaped body (``{"name": ..., "arguments":
...}``) would learn one thing per attempt: so only once it has refused a body is the body read
again as plain JSON and checked field by field against ``ProposalRequest``
(:func:`body_problems`): the happy path pays nothing for it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from broker.api.json_body import (
    REPEATED_KEYS,
    count_keys,
    duplicate_key_pointers,
    repeated_key_errors,
)
from broker.model import FieldError, ProposalRequest
from broker.taxonomy import Code

__all__ = [
    "MAX_DEPTH",
    "Malformed",
    "body_problems",
    "decode_proposal",
    "error_pointer",
    "float_hook",
    "json_pointer_token",
    "tool_naming_problems",
]

_AT = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_FIELD_NAMED = re.compile(r"(?:unknown|missing required) field `([^`]+)`")

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


def float_hook(text: str) -> float | int:
    """The strict decoders' float hook (proposals, resolutions): canonical JSON numbers, so that
    25.0 and 25 are the same argument (and the same fingerprint); non-finite ones refused."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


_decoder = msgspec.json.Decoder(ProposalRequest, float_hook=float_hook)


MAX_DEPTH = 32
"""How deeply a proposal may nest (arrays and objects, the envelope included)."""

_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[][{}]')


class Malformed(msgspec.Struct, frozen=True):
    """Why a body is not a proposal: the code and the located errors."""

    code: Code
    detail: str
    errors: list[FieldError]


def decode_proposal(body: bytes) -> ProposalRequest | Malformed:
    """Decode strictly; a body that is not a proposal says why, with JSON Pointers.

    A body that repeats a key is refused as such (I-JSON, ``broker.api.json_body``) before
    anything else is said about it.
    """
    # Cheap first, in line: few brackets cannot nest deeply.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _too_deep(body):
        return _malformed(f"the body is nested more than {MAX_DEPTH} levels deep")
    try:
        decoded = _decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        repeated = duplicate_key_pointers(body)
        if repeated:
            return _repeated_keys(repeated)
        return _undecodable(body, exc)
    repeated = duplicate_key_pointers(body, _distinct_keys(body, decoded))
    if repeated:
        return _repeated_keys(repeated)
    if decoded.tool and decoded.tool_id is None:
        return decoded
    # Named by tool_id, or by an empty name: was it named exactly once?
    naming = tool_naming_problems(_lenient.decode(body))
    if naming:
        return Malformed(Code.SCHEMA_INVALID, "the body is not a valid proposal", naming)
    return decoded


_envelope = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _distinct_keys(body: bytes, decoded: ProposalRequest) -> int:
    """How many distinct keys ``body``, which decoded as ``decoded``, has: the envelope's
    (their values only delimited, not decoded again) and its arguments' (the only member whose
    type admits objects; were there another, the count would only be low)."""
    return len(_envelope.decode(body)) + count_keys(decoded.args)


def _repeated_keys(pointers: list[str]) -> Malformed:
    return Malformed(Code.MALFORMED_REQUEST, REPEATED_KEYS, repeated_key_errors(pointers))


def _undecodable(body: bytes, exc: BaseException) -> Malformed:
    """Why ``body`` is not a proposal, from what the strict decoder raised reading it."""
    if isinstance(exc, UnicodeDecodeError):
        return _malformed("the body is not valid UTF-8")
    if not isinstance(exc, msgspec.ValidationError):
        return _malformed("the body is not valid JSON")
    message = str(exc)
    # The strict decoder stopped at the first problem: read the body again for all of them.
    try:
        errors = body_problems(body)
    except (msgspec.DecodeError, RecursionError):  # the rest of the body is not JSON
        return _malformed("the body is not valid JSON")
    if not errors:
        pointer = error_pointer(message)
        if pointer is None:  # msgspec could not name the key: find the offending numbers
            paths = _non_finite_paths(_lenient.decode(body), "") or [""]
            errors = [FieldError(p, "number out of range") for p in paths]
        else:
            errors = [FieldError(pointer, _AT.sub("", message))]
    return Malformed(Code.SCHEMA_INVALID, "the body is not a valid proposal", errors)


def _malformed(detail: str) -> Malformed:
    return Malformed(Code.MALFORMED_REQUEST, detail, [FieldError("", detail)])


def _too_deep(body: bytes) -> bool:
    # Walk the structure, skipping strings, and stop at the first level past the limit (so
    # "[" * 100000 costs 33 steps).
    depth = 0
    for match in _STRUCTURE.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def error_pointer(message: str) -> str | None:
    """msgspec's ``$.args[0].x`` location as an RFC 6901 pointer (``/args/0/x``)."""
    where = _AT.search(message)
    path = where.group(1) if where else ""
    if "[...]" in path:
        return None
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", path)
    pointer = "".join("/" + (name or index) for name, index in parts)
    field = _FIELD_NAMED.search(message)
    if field:
        pointer += "/" + field.group(1)
    return pointer


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
