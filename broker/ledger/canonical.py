"""RFC 8785 (JCS) canonical JSON: msgspec's C encoder where it is byte-identical, rfc8785 elsewhere.

Why not call ``rfc8785.dumps`` everywhere: it is pure Python (tens of microseconds per record),
which caps verification far below 50,000 records/s. msgspec's sorted-key encoder already writes
JCS for most values; it differs in exactly three places, each handled here:

* floats: msgspec writes ``1.0``/``1e21``, JCS wants ECMAScript's ``1``/``1e+21``. Every float is
  replaced by a ``msgspec.Raw`` holding ``rfc8785``'s own rendering of it;
* key order: msgspec sorts by code point, JCS by UTF-16 code unit. The two only disagree for keys
  holding characters at or above U+E000, whose UTF-8 lead bytes are 0xEE..0xF4; any output
  containing such a byte is re-encoded with ``rfc8785``;
* integers outside ±(2**53 - 1), which JCS cannot represent: any run of 16 or more digits in
  the output (a superset of those integers) is re-encoded with ``rfc8785``, which raises for
  Python ints (``canonical_json``) and renders the nearest double for JSON text
  (``canonical_json_from_bytes``, see there).

tests/unit/test_ledger_canonical.py proves byte equality against ``rfc8785`` with hypothesis and a
table of edge values (floats, unicode, control characters, nesting).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgspec
import rfc8785

from broker.remembered import Remembered

__all__ = [
    "MAX_SAFE_INT",
    "CanonicalizationError",
    "canonical_json",
    "canonical_json_from_bytes",
    "digest",
    "jcs_float",
    "jcs_float_literal",
    "needs_rfc8785",
]

MAX_SAFE_INT = 2**53 - 1
"""The largest integer JCS (and I-JSON) can represent exactly."""

CanonicalizationError = rfc8785.CanonicalizationError

_ENCODER = msgspec.json.Encoder(order="sorted")
# Digits become "0", the UTF-8 lead bytes of U+E000 and above "!", every other byte ".": what is
# left to look for is a plain substring, which bytes search in C (a regex scan is several times
# slower).
_SUSPECT_BYTES = bytes(
    ord("0") if 0x30 <= byte <= 0x39 else ord("!") if 0xEE <= byte <= 0xF4 else ord(".")
    for byte in range(256)
)
_LONG_DIGIT_RUN = b"0" * 16


def needs_rfc8785(out: bytes) -> bool:
    """Whether msgspec's output may differ from JCS (see the module docstring)."""
    suspect = out.translate(_SUSPECT_BYTES)
    return b"!" in suspect or _LONG_DIGIT_RUN in suspect


def jcs_float(value: float) -> msgspec.Raw:
    # repr() and ECMAScript agree on the shortest round-tripping digits; they differ only in
    # when to switch to exponent notation and in "1.0" vs "1". Without an exponent, dropping
    # a trailing ".0" is exactly what rfc8785 does too; everything else goes to rfc8785.
    text = repr(value)
    if "e" in text or "n" in text or value == 0:  # exponents, inf/nan (which raise), -0.0
        return msgspec.Raw(rfc8785.dumps(value))
    return msgspec.Raw((text[:-2] if text.endswith(".0") else text).encode())


def _jcs_float_text(text: str) -> msgspec.Raw:
    return jcs_float(float(text))


# Remembered: ledgers repeat amounts and prices, and computing a rendering is a Python call
# (most of what re-canonicalizing a small value costs).
jcs_float_literal: Callable[[str], msgspec.Raw] = Remembered(_jcs_float_text, 4096).__getitem__
"""The JCS rendering of a JSON float literal: the ``float_hook`` of msgspec decoders whose output
is re-encoded as JCS."""

_JCS_DECODER = msgspec.json.Decoder(float_hook=jcs_float_literal)


# Values msgspec already writes as JCS does (long integers are caught by needs_rfc8785): most
# of an action's members, skipped without a call.
_AS_IS = frozenset({str, int, bool, type(None)})


def _prepare(value: Any) -> Any:
    """Floats become their JCS rendering; containers are copied only when something changed."""
    if isinstance(value, float):
        return jcs_float(value)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError("object keys must be strings")
            if type(item) in _AS_IS:
                continue
            new = _prepare(item)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, (list, tuple)):
        items: list[Any] | None = None
        for index, item in enumerate(value):
            if type(item) in _AS_IS:
                continue
            new = _prepare(item)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    return value


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 serialization of a JSON value, identical to ``rfc8785.dumps(value)``.

    Raises:
        CanonicalizationError: for what JCS cannot represent (NaN, unsafe integers, lone
            surrogates, non-string keys, non-JSON types).
    """
    try:
        out = _ENCODER.encode(_prepare(value))
    except (TypeError, ValueError):
        return rfc8785.dumps(value)  # raises the precise CanonicalizationError
    if needs_rfc8785(out):
        return rfc8785.dumps(value)
    return out


def canonical_json_from_bytes(raw: bytes) -> bytes:
    """The RFC 8785 serialization of the JSON document ``raw``.

    Numbers are read as RFC 8785 reads them, as IEEE 754 doubles: an integer literal beyond
    ±(2**53 - 1) is the double nearest to it. That is how ``1e20`` (which JCS writes as
    ``100000000000000000000``) re-canonicalizes to the same bytes.

    Raises:
        CanonicalizationError: a number beyond the double range; ``msgspec.DecodeError`` for
            invalid JSON.
    """
    out = _ENCODER.encode(_JCS_DECODER.decode(raw))
    if needs_rfc8785(out):
        return rfc8785.dumps(_as_doubles(msgspec.json.decode(raw)))
    return out


def _as_doubles(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, dict, list)):
        return value
    if isinstance(value, int):
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return value
        try:
            return float(value)
        except OverflowError:
            raise CanonicalizationError(f"number out of range: {value}") from None
    if isinstance(value, dict):
        return {key: _as_doubles(item) for key, item in value.items()}
    return [_as_doubles(item) for item in value]


def digest(canonical: bytes) -> str:
    """``"sha256:" + hex(SHA-256(canonical))``, the form of every hash in the ledger."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
