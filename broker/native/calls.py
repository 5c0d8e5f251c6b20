"""What every provider's normaliser produces and consumes: native calls in, outcomes out.

A normaliser (one module per provider) reads the ``calls`` member of a ``POST /v1/tool-calls``
body into :class:`NativeCall` items, and shapes each call's :class:`CallOutcome` into that
provider's own result messages. Everything in between (the chain, execution, the ledger) is the
proposal pipeline's.
"""

from __future__ import annotations

import math
import re
from typing import Any, Protocol

import msgspec

from broker.model import FieldError

__all__ = [
    "CallOutcome",
    "MalformedCalls",
    "NativeCall",
    "Normaliser",
    "decode_arguments",
    "field_error",
    "pointer_token",
]


class NativeCall(msgspec.Struct, frozen=True):
    """One tool call as the model made it.

    ``args`` is ``None`` when the call's own arguments are unusable (not JSON, not an object);
    ``problem`` then says why, located in the request body.
    """

    call_id: str | None
    name: str
    args: dict[str, Any] | None
    problem: FieldError | None = None


class CallOutcome(msgspec.Struct, frozen=True):
    """A call's result as the model reads it: the execution result, or ``{"error": {...}}``."""

    content: dict[str, Any]
    is_error: bool


class MalformedCalls(Exception):
    """The ``calls`` payload as a whole cannot be read; ``errors`` point into the body."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.message}" for e in errors))
        self.errors = errors


class Normaliser(Protocol):
    """One provider's format: its calls in, its results out."""

    def read(self, calls: msgspec.Raw) -> list[NativeCall]:
        """The calls of the payload in order; raises :class:`MalformedCalls`."""
        ...

    def results(self, calls: list[NativeCall], outcomes: list[CallOutcome]) -> Any:
        """The provider's result messages, in call order, ready to append to the conversation."""
        ...


def _float_hook(text: str) -> float | int:
    # As for proposals: 25.0 and 25 are the same argument (and the same fingerprint).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


_arguments = msgspec.json.Decoder(dict[str, Any], float_hook=_float_hook)


def decode_arguments(text: str | bytes, pointer: str) -> dict[str, Any] | FieldError:
    """A call's arguments (JSON text) as an object, or the call's own problem."""
    try:
        return _arguments.decode(text)
    except msgspec.ValidationError:
        return FieldError(pointer, "the arguments must be a JSON object")
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError):
        return FieldError(pointer, "the arguments are not valid JSON")


_AT = re.compile(r" - at `\$(.*)`$")


def pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def field_error(exc: msgspec.ValidationError | msgspec.DecodeError, prefix: str) -> FieldError:
    """msgspec's message located by a JSON Pointer under ``prefix`` (``$[0].id`` → ``/0/id``)."""
    message = str(exc)
    where = _AT.search(message)
    path = where.group(1) if where else ""
    # A mapping's value is "[...]" to msgspec, which does not name the key: point at the mapping.
    path, unnamed, _ = path.partition("[...]")
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", path)
    pointer = prefix + "".join("/" + (name or index) for name, index in parts)
    field = re.search(r"(?:unknown|missing required) field `([^`]+)`", message)
    if field and not unnamed:
        pointer += "/" + pointer_token(field.group(1))
    return FieldError(pointer, _AT.sub("", message))
