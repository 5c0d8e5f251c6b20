"""Redaction of sensitive keys, and normalization of args/results into values JCS can hash."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import rfc8785

from broker.ledger.canonical import MAX_SAFE_INT, jcs_float, needs_rfc8785
from broker.remembered import Remembered

__all__ = ["REDACTED", "redact", "redacted_canonical_json", "sensitive_key_set"]

REDACTED = "[REDACTED]"

_ENCODER = msgspec.json.Encoder(order="sorted")


def sensitive_key_set(keys: Iterable[str]) -> frozenset[str]:
    """The case-folded form ``redact`` matches against."""
    if type(keys) is frozenset:
        # A tool's own set, the same object on every record: remembered (a dict lookup costs
        # a third of what lru_cache's wrapper did).
        return _folded[keys]
    return _fold(keys)


def _fold(keys: Iterable[str]) -> frozenset[str]:
    return frozenset(key.casefold() for key in keys)


_folded: Remembered[frozenset[str], frozenset[str]] = Remembered(_fold, 256)


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
    return _normalized(value, sensitive, _as_is)


def redacted_canonical_json(value: Any, sensitive: frozenset[str]) -> bytes:
    """``canonical_json(redact(value, sensitive))``, in one walk over ``value`` instead of two.

    The walk that redacts also renders each float as JCS writes it, so msgspec's sorted encoder
    produces the canonical bytes directly; only output that msgspec may render differently
    from JCS (see ``canonical``) goes through ``rfc8785``. A value that redaction would leave
    as it is (the usual arguments and results) is encoded without building a copy.
    """
    if _untouched(value, sensitive):
        try:
            out = _ENCODER.encode(value)
        except ValueError:  # a lone surrogate: the walk replaces it
            pass
        else:
            if out.isascii() or not needs_rfc8785(out):
                return out
    # The walk leaves only JSON values (floats as JCS text), so encoding cannot fail.
    out = _ENCODER.encode(_normalized(value, sensitive, jcs_float))
    if needs_rfc8785(out):
        return rfc8785.dumps(redact(value, sensitive))
    return out


# Leaves the walk returns as they are, and msgspec encodes as JCS does, whatever their value.
_TEXT_LEAVES = frozenset({str, bool, type(None)})


def _untouched(value: Any, sensitive: frozenset[str]) -> bool:
    """Whether the walk would return ``value`` as it is, so that msgspec encodes it directly:
    only dicts with non-sensitive keys of type ``str``, lists, and leaves of type ``str``,
    ``bool``, ``NoneType`` or ``int`` within ±(2**53 - 1); no floats, tuples or subclasses
    (the ``str()`` of a subclass, which the walk takes for a key, may not be what msgspec
    writes).

    Nothing is built, and keys are checked against those already seen (``_known_keys``)
    instead of being case-folded one by one. Strings are not looked at: a lone surrogate makes
    msgspec raise, and ``needs_rfc8785`` checks output with non-ASCII bytes.
    """
    kind = type(value)
    if kind is dict:
        for key in value:
            if type(key) is not str:
                return False
        known = _known_keys.get(sensitive)
        if (known is None or not value.keys() <= known) and not _learn_keys(value, sensitive):
            return False
        children: Iterable[Any] = value.values()
    elif kind is list:
        children = value
    else:
        return kind in _TEXT_LEAVES or (kind is int and -MAX_SAFE_INT <= value <= MAX_SAFE_INT)
    for child in children:
        kind = type(child)
        if kind in _TEXT_LEAVES:
            continue
        if kind is int:
            if not -MAX_SAFE_INT <= child <= MAX_SAFE_INT:
                return False
        elif kind is dict or kind is list:
            if not _untouched(child, sensitive):
                return False
        else:
            return False
    return True


_known_keys: dict[frozenset[str], set[str]] = {}
"""Per set of sensitive keys, object keys already found not to be in it: most objects repeat
keys seen before, which one subset test in C then clears (case-folding makes a string per key).
Each set is started afresh past ``_KNOWN_KEYS_LIMIT`` keys."""
_KNOWN_KEYS_LIMIT = 4096


def _learn_keys(obj: dict[str, Any], sensitive: frozenset[str]) -> bool:
    """Whether no key of ``obj`` is sensitive; if so, its keys are remembered as known."""
    if not sensitive.isdisjoint(map(str.casefold, obj)):
        return False
    known = _known_keys.get(sensitive)
    if known is None or len(known) >= _KNOWN_KEYS_LIMIT:
        known = _known_keys[sensitive] = set()
    known.update(obj)
    return True


def _as_is(value: float) -> float:
    return value


def _normalized(value: Any, sensitive: frozenset[str], finite_float: Callable[[float], Any]) -> Any:
    # Exact-type checks first: args and results are almost always plain JSON values, and
    # ``type(x) is str`` is cheaper than ``isinstance``; subclasses take the general path below.
    kind = type(value)
    if kind is str:
        return value if value.isascii() else _valid_unicode(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if type(key) is str else str(key)
            if not name.isascii():
                name = _valid_unicode(name)
            if name.casefold() in sensitive:
                out[name] = REDACTED
            else:
                out[name] = _normalized(item, sensitive, finite_float)
        return out
    if kind is int:
        return value if -MAX_SAFE_INT <= value <= MAX_SAFE_INT else str(value)
    if kind is float:
        return finite_float(value) if math.isfinite(value) else str(value)
    if kind is list or kind is tuple:
        return [_normalized(item, sensitive, finite_float) for item in value]
    if value is None or kind is bool:
        return value
    return _normalized_other(value, sensitive, finite_float)


def _normalized_other(
    value: Any, sensitive: frozenset[str], finite_float: Callable[[float], Any]
) -> Any:
    """Subclasses of the JSON types (enums, ...) and everything else."""
    if isinstance(value, str):
        return value if value.isascii() else _valid_unicode(value)
    if isinstance(value, int):  # bool cannot be subclassed: an IntEnum, say
        return _normalized(int(value), sensitive, finite_float)
    if isinstance(value, float):
        return _normalized(float(value), sensitive, finite_float)
    if isinstance(value, dict):
        return _normalized(dict(value), sensitive, finite_float)
    if isinstance(value, (list, tuple)):
        return [_normalized(item, sensitive, finite_float) for item in value]
    try:
        builtin = msgspec.to_builtins(value)
    except TypeError:
        return _valid_unicode(str(value))
    return _normalized(builtin, sensitive, finite_float)


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
