"""Redaction of sensitive keys, and normalization of args/results into values JCS can hash."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import msgspec

from broker.ledger.canonical import MAX_SAFE_INT

__all__ = ["REDACTED", "redact", "sensitive_key_set"]

REDACTED = "[REDACTED]"


def sensitive_key_set(keys: Iterable[str]) -> frozenset[str]:
    """The case-folded form ``redact`` matches against (computed once per call site)."""
    return frozenset(key.casefold() for key in keys)


def redact(value: Any, sensitive: frozenset[str]) -> Any:
    """A copy of ``value`` where every object key in ``sensitive`` (case-folded) maps to "[REDACTED]".

    Matching happens at any depth, inside lists too; a sensitive key's whole value is replaced,
    even when it is an object. The copy is also normalized so it is always hashable as JCS and
    the ledger never refuses a write because of an odd value:

    * tuples become lists, non-string keys become their ``str()``;
    * integers outside ±(2**53 - 1) and non-finite floats become their decimal string, so no
      digit is lost (JCS cannot represent them as numbers);
    * strings with lone surrogates get U+FFFD in their place;
    * anything else goes through ``msgspec.to_builtins`` (datetimes, Structs, ...), then ``str()``.
    """
    if isinstance(value, str):
        return value if value.isascii() else _valid_unicode(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -MAX_SAFE_INT <= value <= MAX_SAFE_INT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            name = name if name.isascii() else _valid_unicode(name)
            out[name] = REDACTED if name.casefold() in sensitive else redact(item, sensitive)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(item, sensitive) for item in value]
    try:
        builtin = msgspec.to_builtins(value)
    except TypeError:
        return _valid_unicode(str(value))
    return redact(builtin, sensitive)


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
