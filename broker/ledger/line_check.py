"""Re-checking a stored ledger line: its args, result and record hashes derived again from what
it holds, as ``broker.ledger.sealing`` derived them when it sealed the line (chain linkage is
the verifier's, ``broker.ledger.verify``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from broker.ledger.canonical import (
    CanonicalizationError,
    canonical_json_from_bytes,
    digest,
    jcs_float_literal,
    needs_rfc8785,
)
from broker.ledger.sealing import StoredRecord

__all__ = ["LineCheck", "check_line"]

_ENCODER = msgspec.json.Encoder(order="sorted")
_STORED = msgspec.json.Decoder(StoredRecord)


class LineCheck(msgspec.Struct, frozen=True):
    """What ``check_line`` found: the record's identity, or the reason it is bad."""

    seq: int | None
    prev_hash: str
    hash: str
    problem: str | None


# StoredRecord without the hash patterns (msgspec runs a Python regex per pattern: half of the
# decoding time) and with args/result decoded in place, every float already in its JCS rendering,
# rather than as raw slices to decode again.
_UNCHECKED_TYPES: dict[str, Any] = {
    "args_hash": str,
    "args_redacted": Any,
    "prev_hash": str,
    "result_hash": str | None,
    "result_redacted": Any,
}
_CanonicalView = msgspec.defstruct(
    "_CanonicalView",
    [
        (
            field.name,
            _UNCHECKED_TYPES.get(field.name, field.type),
            *(() if field.default is msgspec.NODEFAULT else (field.default,)),
        )
        for field in msgspec.structs.fields(StoredRecord)
    ],
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
)
# Typed as Any: mypy cannot see the fields of a struct built at run time.
_CANONICAL_VIEW: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    _CanonicalView, float_hook=jcs_float_literal
)
# Stricter than the pattern (whose "$" also matches before a final newline): only ever defers.
_HASH_SHAPE = re.compile(r"sha256:[0-9a-f]{64}")


def check_line(line: bytes) -> LineCheck:
    """Re-derive args/result/record hashes of one stored line (chain linkage is the caller's job).

    The record hash must be SHA-256 of the JCS form of the record without "hash", whatever the
    line's own formatting: a line is accepted only if the hashes match what re-encoding its
    decoded content canonically gives.
    """
    found = _check_sound_line(line)
    return found if found is not None else _rederive(line)


def _check_sound_line(line: bytes) -> LineCheck | None:
    """The verdict on a sound line, in one decode; ``None`` for anything else.

    Computes the very bytes ``_rederive`` hashes (same decoding, same float renderings, same
    encoder) but only ever says "no problem": a failed check, a value JCS renders differently
    from msgspec, or a field the skipped patterns would have refused, all defer to ``_rederive``,
    so a verdict never depends on which of the two ran.
    """
    try:
        view = _CANONICAL_VIEW.decode(line)
    except (msgspec.DecodeError, ValueError):  # CanonicalizationError is a ValueError
        return None
    args = _ENCODER.encode(view.args_redacted)
    result = _ENCODER.encode(view.result_redacted)
    # A digit run may span the seam of args and result: that only errs on the safe side.
    if needs_rfc8785(args + result) or _HASH_SHAPE.fullmatch(view.prev_hash) is None:
        return None
    if digest(args) != view.args_hash:
        return None
    # As in _rederive: a result is there (and hashed) exactly when it is not null.
    if (view.result_hash is None) != (result == b"null"):
        return None
    if view.result_hash is not None and digest(result) != view.result_hash:
        return None
    # Matching digests imply the args/result hash patterns; prev_hash was checked above.
    body = msgspec.structs.replace(
        view, hash="", args_redacted=msgspec.Raw(args), result_redacted=msgspec.Raw(result)
    )  # the Raw copies spare encoding (and sorting) args and result a second time
    if digest(_ENCODER.encode(body)) != view.hash:
        return None
    return LineCheck(view.seq, view.prev_hash, view.hash, None)


def _rederive(line: bytes) -> LineCheck:
    """Decode, validate and re-canonicalize step by step, naming the first thing that is wrong."""
    try:
        stored = _STORED.decode(line)
    except (msgspec.DecodeError, ValueError):
        return LineCheck(None, "", "", "malformed record")
    if not stored.hash:
        return LineCheck(stored.seq, stored.prev_hash, "", "malformed record")
    try:
        args_canonical = canonical_json_from_bytes(stored.args_redacted)
        result_canonical = canonical_json_from_bytes(stored.result_redacted)
    except (msgspec.DecodeError, CanonicalizationError, ValueError):
        return LineCheck(stored.seq, stored.prev_hash, stored.hash, "malformed record")
    problem = None
    if digest(args_canonical) != stored.args_hash:
        problem = "args_hash mismatch"
    elif (stored.result_hash is None) != (result_canonical == b"null") or (
        stored.result_hash is not None and digest(result_canonical) != stored.result_hash
    ):
        problem = "result_hash mismatch"
    else:
        body = msgspec.structs.replace(
            stored,
            hash="",
            args_redacted=msgspec.Raw(args_canonical),
            result_redacted=msgspec.Raw(result_canonical),
        )
        if digest(_ENCODER.encode(body)) != stored.hash:
            problem = "hash mismatch"
    return LineCheck(stored.seq, stored.prev_hash, stored.hash, problem)
